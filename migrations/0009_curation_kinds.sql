-- A curated set that cannot drift (issue 15), part 1: the names the next migration uses.
-- PostgreSQL does not let a transaction use an enum value it added, so they come first.

-- A retry pass re-queued the sample, dropping its decision (the text it applied to goes away).
ALTER TYPE review_event_kind ADD VALUE IF NOT EXISTS 'requeue';
-- An export waiting for a process to claim it.
ALTER TYPE export_status ADD VALUE IF NOT EXISTS 'queued' BEFORE 'running';
