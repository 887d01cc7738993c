-- Imports are jobs held under a lease, as exports are (0010): the process importing a dataset
-- renews its lease while it reads; when it stops renewing (killed, crashed, lost the
-- database), another process takes the import over from the start, or fails it with the
-- reason after `claims` starts. An import is never left `importing` with nobody on it.
ALTER TABLE datasets
    ADD COLUMN lease_owner      uuid,
    ADD COLUMN lease_expires_at timestamptz,
    -- How many times a process has started the import.
    ADD COLUMN claims           integer NOT NULL DEFAULT 0;

-- Imports an earlier release left `importing` have no process renewing them: their lease has
-- run out already, so the first process to look takes them over.
UPDATE datasets SET lease_owner = '00000000-0000-0000-0000-000000000000', lease_expires_at = progress_at,
                    claims = 1
WHERE status = 'importing';

ALTER TABLE datasets ADD CONSTRAINT datasets_leased_while_importing CHECK (
    (status = 'importing') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL));

CREATE INDEX datasets_importing_idx ON datasets (lease_expires_at) WHERE status = 'importing';
