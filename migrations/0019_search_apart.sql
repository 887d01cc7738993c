-- The search vector moves out of `samples` into a table of its own, written only when a
-- sample's text changes.
--
-- As a stored column of `samples`, its GIN index took new entries (one per distinct word of the
-- sample, hundreds) at every update that wrote new index entries for the sample, not only when
-- the text changed: every review decision and claim (they change indexed columns), a lease
-- renewal that did not fit on its page. Updating an indexed column of 25,000 rows of 300 words
-- each, drawn from 5,000 (some far more often), took 13.2 s with such an index and 0.9 s without
-- it (psql, PostgreSQL 15, while a build ran; 172 s against 0.3 s with distinct random words).
-- Apart, a decision touches b-trees only.
CREATE FUNCTION sample_search_vector(messages jsonb, reasoning text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- As 0013 had it: the conversation when there is one (it ends with the reasoning and the
-- answer), capped under the 1 MB a tsvector may hold; else what had arrived of each.
AS $$
    SELECT CASE WHEN messages IS NOT NULL AND octet_length(messages::text) <= 200000
        THEN jsonb_to_tsvector('simple'::regconfig, messages, '["string"]'::jsonb)
        ELSE to_tsvector('simple'::regconfig, left(COALESCE(reasoning, ''), 200000))
            || to_tsvector('simple'::regconfig, left(COALESCE(content, ''), 200000))
    END
$$;

-- One row per sample with any text (a pending sample has none: no row).
CREATE TABLE sample_search (
    sample_id bigint   PRIMARY KEY REFERENCES samples (id) ON DELETE CASCADE,
    search    tsvector NOT NULL
);
INSERT INTO sample_search (sample_id, search)
SELECT id, search FROM samples WHERE search <> ''::tsvector;
CREATE INDEX sample_search_idx ON sample_search USING gin (search);
ALTER TABLE samples DROP COLUMN search;

CREATE FUNCTION sample_search_keep() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v tsvector := sample_search_vector(NEW.messages, NEW.reasoning, NEW.content);
BEGIN
    IF v = ''::tsvector THEN
        DELETE FROM sample_search WHERE sample_id = NEW.id;
    ELSE
        INSERT INTO sample_search (sample_id, search) VALUES (NEW.id, v)
        ON CONFLICT (sample_id) DO UPDATE SET search = EXCLUDED.search;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER samples_search_insert AFTER INSERT ON samples FOR EACH ROW
    WHEN (NEW.messages IS NOT NULL OR NEW.reasoning IS NOT NULL OR NEW.content IS NOT NULL)
    EXECUTE FUNCTION sample_search_keep();
-- Only statements that set the text fire it, and only for samples whose text changed.
CREATE TRIGGER samples_search_update AFTER UPDATE OF messages, reasoning, content ON samples FOR EACH ROW
    WHEN (OLD.messages IS DISTINCT FROM NEW.messages OR OLD.reasoning IS DISTINCT FROM NEW.reasoning
          OR OLD.content IS DISTINCT FROM NEW.content)
    EXECUTE FUNCTION sample_search_keep();
