-- Review: each sample's decision (with a version for optimistic concurrency), flags, notes,
-- the reviewer queue's leases, full-text search, and the audit log of every decision.

CREATE TYPE review_state AS ENUM ('unreviewed', 'approved', 'rejected', 'flagged');

-- The reasons a sample can be flagged with. Reviewers pick from the `selectable` ones; the
-- engine adds the `automatic` ones when a result arrives. Admins can add rows.
CREATE TABLE flag_reasons (
    code        text    PRIMARY KEY CHECK (code ~ '^[a-z][a-z0-9_]{0,39}$'),
    label       text    NOT NULL,
    position    integer NOT NULL,
    selectable  boolean NOT NULL DEFAULT true,
    automatic   boolean NOT NULL DEFAULT false
);
INSERT INTO flag_reasons (code, label, position, selectable, automatic) VALUES
    ('truncated',      'truncated',                1, true,  true),
    ('repetition',     'repetition',               2, true,  true),
    ('refusal',        'refusal',                  3, true,  false),
    ('wrong_language', 'wrong language',           4, true,  false),
    ('formatting',     'formatting',               5, true,  false),
    ('factual_error',  'factual error',            6, true,  false),
    ('other',          'other',                    7, true,  false),
    ('timed_out',      'timed out',                8, false, true),
    ('empty_answer',   'empty answer',             9, false, true),
    ('reasoning_only', 'reasoning only',          10, false, true),
    ('think_markers',  'leftover <think> markers', 11, false, true),
    ('failed',         'failed',                  12, false, true);

ALTER TABLE samples
    ADD COLUMN review_state      review_state NOT NULL DEFAULT 'unreviewed',
    -- Bumped by every review change; a save must name the version it was based on.
    ADD COLUMN review_version    integer      NOT NULL DEFAULT 0,
    -- Reasons chosen by the reviewer (flag_reasons.code).
    ADD COLUMN flags             text[]       NOT NULL DEFAULT '{}',
    -- Reasons found by the engine when the result arrived (flag_reasons.code).
    ADD COLUMN auto_flags        text[]       NOT NULL DEFAULT '{}',
    ADD COLUMN review_note       text,
    ADD COLUMN reviewed_by       bigint       REFERENCES users (id),
    ADD COLUMN reviewed_at       timestamptz,
    -- Queue mode: the reviewer holding the sample, and until when.
    ADD COLUMN review_lease_owner   bigint     REFERENCES users (id),
    ADD COLUMN review_lease_expires timestamptz,
    -- Full-text search over the conversation as sent, the reasoning and the answer. Each part
    -- is capped so one huge trace cannot exceed the 1 MB tsvector limit.
    ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(jsonb_to_tsvector('simple'::regconfig, COALESCE(messages, '[]'::jsonb), '["string"]'::jsonb), 'A')
        || setweight(to_tsvector('simple'::regconfig, left(COALESCE(reasoning, ''), 200000)), 'B')
        || setweight(to_tsvector('simple'::regconfig, left(COALESCE(content, ''), 200000)), 'A')
    ) STORED,
    ADD CONSTRAINT samples_review_lease_pair CHECK (
        (review_lease_owner IS NULL) = (review_lease_expires IS NULL)),
    ADD CONSTRAINT samples_reviewed_pair CHECK (
        (review_state = 'unreviewed') OR (reviewed_at IS NOT NULL));

CREATE INDEX samples_search_idx ON samples USING gin (search);
CREATE INDEX samples_flags_idx ON samples USING gin (flags);
CREATE INDEX samples_auto_flags_idx ON samples USING gin (auto_flags);
CREATE INDEX samples_run_review_idx ON samples (run_id, review_state, id);
-- One run's samples in key order, alone or by outcome (0003's (run_id, state) has no id).
CREATE INDEX samples_run_id_idx ON samples (run_id, id);
CREATE INDEX samples_run_outcome_idx ON samples (run_id, state, id);
CREATE INDEX samples_review_idx ON samples (review_state, id);
CREATE INDEX samples_state_idx ON samples (state, id);
CREATE INDEX samples_finish_reason_idx ON samples (finish_reason, id);
CREATE INDEX samples_reviewed_by_idx ON samples (reviewed_by, id) WHERE reviewed_by IS NOT NULL;
-- Keyset paging for the length and duration orders (NULL sorts as -1).
CREATE INDEX samples_completion_order_idx ON samples ((COALESCE(completion_tokens, -1)), id);
CREATE INDEX samples_duration_order_idx ON samples ((COALESCE(duration_ms, -1)), id);
-- Queue mode: the next unreviewed finished sample.
CREATE INDEX samples_review_queue_idx ON samples (id)
    WHERE review_state = 'unreviewed' AND state NOT IN ('pending', 'running');
CREATE INDEX samples_review_queue_run_idx ON samples (run_id, id)
    WHERE review_state = 'unreviewed' AND state NOT IN ('pending', 'running');
-- The sample a reviewer holds.
CREATE INDEX samples_review_lease_idx ON samples (review_lease_owner) WHERE review_lease_owner IS NOT NULL;

CREATE TYPE review_event_kind AS ENUM ('decision', 'bulk', 'undo', 'regenerate');

-- Every review change: who, when, from what to what, and why.
CREATE TABLE review_events (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sample_id   bigint            NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
    kind        review_event_kind NOT NULL,
    actor       bigint            REFERENCES users (id),
    at          timestamptz       NOT NULL DEFAULT now(),
    from_state  review_state      NOT NULL,
    to_state    review_state      NOT NULL,
    from_flags  text[]            NOT NULL,
    to_flags    text[]            NOT NULL,
    from_note   text,
    to_note     text,
    -- Who had decided before, and when, so an undo restores exactly that.
    from_reviewed_by bigint       REFERENCES users (id),
    from_reviewed_at timestamptz,
    -- The sample's review_version after this change.
    version     integer           NOT NULL,
    -- Set on a decision once it has been undone (by the undo event named here).
    undone_by   bigint            REFERENCES review_events (id)
);
CREATE INDEX review_events_sample_idx ON review_events (sample_id, id);
CREATE INDEX review_events_actor_idx ON review_events (actor, at);
