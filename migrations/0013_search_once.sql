-- Cheaper settles: every settled try rewrites a sample's search vector and its GIN entries,
-- the largest part of what PostgreSQL spends on a result (README, "Where the fixed-limit gap
-- goes").
--
-- 0005's vector tokenized the reasoning and the answer twice: a kept conversation (`messages`)
-- already ends with them as its last assistant turn. Now the conversation alone is indexed when
-- there is one, and the reasoning and answer columns only when there is none (a failed or
-- timed-out try keeps just what had arrived). Nothing ranks by weight, so the weights go.
--
-- A tsvector holds at most 1 MB, and a statement that builds a larger one fails: a settle would
-- be refused and its generated output lost. So a conversation is indexed whole only up to 200,000
-- bytes of JSON (its vector stays under 0.4 MB even for text of distinct short words); a longer
-- one is searched by its last reasoning and answer (the first 200,000 characters of each).
ALTER TABLE samples DROP COLUMN search;
ALTER TABLE samples ADD COLUMN search tsvector GENERATED ALWAYS AS (
    CASE WHEN messages IS NOT NULL AND octet_length(messages::text) <= 200000
        THEN jsonb_to_tsvector('simple'::regconfig, messages, '["string"]'::jsonb)
        ELSE to_tsvector('simple'::regconfig, left(COALESCE(reasoning, ''), 200000))
            || to_tsvector('simple'::regconfig, left(COALESCE(content, ''), 200000))
    END
) STORED;
CREATE INDEX samples_search_idx ON samples USING gin (search);

-- (run_id, state) is a prefix of samples_run_outcome_idx (run_id, state, id), which serves the
-- same lookups; one index fewer to update on every state change.
DROP INDEX samples_run_state_idx;
