-- The draft in the loop: how a speculative-decoding draft did on each sample, as vLLM 0.32
-- reports it per request (`--per-request-spec-decode-metrics`), and runs that evaluate a named
-- draft. docs/acceptance.md says how the figures are pooled.

-- Each try's figures (summed over its requests): verify steps, accepted and proposed draft
-- tokens, the server's draft length K, and the steps by tokens accepted (K + 1 entries). A try
-- against a server without a draft, or whose draft verified nothing, has none: NULL, never 0.
ALTER TABLE sample_attempts
    ADD COLUMN spec_steps     integer,
    ADD COLUMN spec_accepted  integer,
    ADD COLUMN spec_drafted   integer,
    ADD COLUMN spec_tokens    smallint,
    ADD COLUMN spec_histogram integer[],
    ADD CONSTRAINT sample_attempts_spec_whole CHECK (
        num_nulls(spec_steps, spec_accepted, spec_drafted, spec_tokens, spec_histogram) IN (0, 5)
        AND (spec_steps IS NULL OR spec_steps > 0));

-- The sample's current figures (its last settled try's; a failed try leaves none), and its
-- acceptance length in thousandths of a token (2.417 → 2417): an integer, so the review list
-- pages by it with the same (value, id) keys as its other orders.
ALTER TABLE samples
    ADD COLUMN spec_steps     integer,
    ADD COLUMN spec_accepted  integer,
    ADD COLUMN spec_drafted   integer,
    ADD COLUMN spec_tokens    smallint,
    ADD COLUMN spec_histogram integer[],
    ADD COLUMN acceptance_milli integer GENERATED ALWAYS AS (
        round(1000 + 1000 * spec_accepted::numeric / spec_steps)::integer) STORED,
    ADD CONSTRAINT samples_spec_whole CHECK (
        num_nulls(spec_steps, spec_accepted, spec_drafted, spec_tokens, spec_histogram) IN (0, 5)
        AND (spec_steps IS NULL OR (spec_steps > 0 AND spec_accepted >= 0)));
-- The review list's acceptance orders: lowest first with samples without a figure last, and
-- highest first with them last too.
CREATE INDEX samples_acceptance_low_idx ON samples ((COALESCE(acceptance_milli, 2147483647)), id);
CREATE INDEX samples_acceptance_high_idx ON samples ((COALESCE(acceptance_milli, -1)), id);

-- Whether the server runs a draft (its /metrics has spec_decode counters), as the last
-- connection test saw it; NULL when its /metrics could not be read.
ALTER TABLE endpoints ADD COLUMN runs_draft boolean;

-- The server's acceptance length over about the last minute (1 + Δaccepted ÷ Δdrafts of its
-- counters), as the workers' endpoint watch last read it, and over how many seconds.
ALTER TABLE endpoint_capacity
    ADD COLUMN spec_acceptance  real,
    ADD COLUMN spec_window_secs real;

-- A run that evaluates a named draft: its prompts go to a target+draft server and the samples'
-- acceptance is what it is for. A revision is only given with a name.
ALTER TABLE runs
    ADD COLUMN draft_name     text CHECK (draft_name <> ''),
    ADD COLUMN draft_revision text,
    ADD CONSTRAINT runs_draft_revision_needs_name CHECK (draft_revision IS NULL OR draft_name IS NOT NULL);
CREATE INDEX runs_evaluations_idx ON runs (id) WHERE draft_name IS NOT NULL;

-- Which samples an export wrote, into which split: an evaluation can send an export's
-- validation prompts to a draft trained on its training split.
CREATE TYPE export_split AS ENUM ('train', 'validation');
CREATE TABLE export_samples (
    export_id bigint       NOT NULL REFERENCES exports (id) ON DELETE CASCADE,
    sample_id bigint       NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
    split     export_split NOT NULL,
    PRIMARY KEY (export_id, sample_id)
);

-- A new sample's thinking mode (domain::generation::Thinking), in one place for every way a
-- run draws its prompts: on, off, a mix drawn per row from the run's seed, the server's default
-- (NULL), or `source`: the mode the prompt had in the run or export it comes from.
CREATE FUNCTION sample_thinking(mode text, row_id bigint, seed bigint, on_ratio float8, source boolean)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE mode
        WHEN 'on' THEN true
        WHEN 'off' THEN false
        WHEN 'mix' THEN (hashint8(row_id # seed) & 1048575) < on_ratio * 1048576
        WHEN 'source' THEN source
        ELSE NULL
    END
$$;
