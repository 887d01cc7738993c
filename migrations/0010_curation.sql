-- A curated set that cannot drift (issue 15), part 2.
--
-- 1. Review state follows the text. Every review event records a hash of the text it applied
--    to, and a decision exists only on a finished sample: re-queueing one drops its decision
--    (engine::samples::requeue logs it first), so a new text is never shipped as approved.
-- 2. Exports are jobs: queued, then claimed by a process under a lease it renews; a job whose
--    lease ran out is taken over (or failed, or cancelled) by the next claimer.
-- 3. The endpoint's server version, for the export manifest's provenance.

-- The text a review decision is about: the conversation as regenerated, the reasoning and the
-- answer. Unambiguous (a JSON array of the three), so two different texts never share a hash.
CREATE FUNCTION sample_text_hash(messages jsonb, reasoning text, content text) RETURNS bytea
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN sha256(convert_to(jsonb_build_array(messages, reasoning, content)::text, 'UTF8'));

-- NULL for events logged before this migration (the text they applied to is not known).
ALTER TABLE review_events ADD COLUMN text_hash bytea;

-- Samples a retry pass put back in the queue while they kept their decision (the bug this
-- fixes): the decision is dropped now and logged, as a retry pass does from here on.
WITH target AS (
    SELECT id, review_state, flags, review_note, reviewed_by, reviewed_at FROM samples
    WHERE state IN ('pending', 'running') AND review_state <> 'unreviewed'
    FOR UPDATE),
reset AS (
    UPDATE samples s SET review_state = 'unreviewed', flags = '{}', review_note = NULL, reviewed_by = NULL,
           reviewed_at = NULL, review_version = s.review_version + 1,
           review_lease_owner = NULL, review_lease_expires = NULL
    FROM target t WHERE s.id = t.id
    RETURNING s.id, s.review_version)
INSERT INTO review_events (sample_id, kind, actor, from_state, to_state, from_flags, to_flags, from_note, to_note,
                           from_reviewed_by, from_reviewed_at, version)
SELECT t.id, 'requeue', NULL, t.review_state, 'unreviewed', t.flags, '{}', t.review_note, NULL,
       t.reviewed_by, t.reviewed_at, r.review_version
FROM target t JOIN reset r ON r.id = t.id;

ALTER TABLE samples ADD CONSTRAINT samples_decided_only_when_finished
    CHECK (state NOT IN ('pending', 'running') OR review_state = 'unreviewed');

-- "Regenerated since your decision": the latest event of a sample, found from the end.
-- (review_events_sample_idx (sample_id, id) serves it.)

-- Exports as jobs.
ALTER TABLE exports
    DROP CONSTRAINT exports_finished_iff_done,
    ALTER COLUMN status SET DEFAULT 'queued',
    -- The process running it, and until when (it renews while it writes).
    ADD COLUMN lease_owner      uuid,
    ADD COLUMN lease_expires_at timestamptz,
    -- How many times a process started it (a take-over after a crash is one more).
    ADD COLUMN claims           integer NOT NULL DEFAULT 0,
    ADD COLUMN started_at       timestamptz;

-- Exports the old code left running were run by a process that has stopped (nothing ever
-- ended them); nothing of them is visible in a destination (staging only).
UPDATE exports SET status = 'failed', finished_at = now(),
       error = 'the server stopped while this export ran (before this upgrade); start it again'
WHERE status = 'running';

ALTER TABLE exports
    ADD CONSTRAINT exports_finished_iff_done CHECK ((status IN ('queued', 'running')) = (finished_at IS NULL)),
    ADD CONSTRAINT exports_lease_iff_running CHECK (
        (status = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL));
DROP INDEX exports_running_idx;
-- Claiming and reaping: the open jobs in id order.
CREATE INDEX exports_open_idx ON exports (id) WHERE status IN ('queued', 'running');

-- What the endpoint reported as its server version (vLLM's GET /version) at its last check.
ALTER TABLE endpoints ADD COLUMN server_version text;
