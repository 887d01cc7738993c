-- The loop's lineage: a draft revision and the export it was trained on. An evaluation (a run
-- with a draft) names a revision here, so an export lists the drafts trained on it and their
-- evaluations, and a draft's revisions read as one chain (docs/acceptance.md, "The loop").
CREATE TABLE draft_revisions (
    name       text        NOT NULL CHECK (name <> ''),
    -- '' for a draft evaluated without a revision name.
    revision   text        NOT NULL DEFAULT '',
    -- The export whose training rows it was trained on; NULL for a starting draft, or one
    -- trained outside Draft Studio. An export a draft was trained on cannot be deleted.
    trained_on bigint      REFERENCES exports (id) ON DELETE RESTRICT,
    created_by bigint      REFERENCES users (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, revision)
);
CREATE INDEX draft_revisions_trained_on_idx ON draft_revisions (trained_on) WHERE trained_on IS NOT NULL;

-- Every evaluation names a registered revision ('' when it gave none).
UPDATE runs SET draft_revision = '' WHERE draft_name IS NOT NULL AND draft_revision IS NULL;
INSERT INTO draft_revisions (name, revision, created_at)
SELECT draft_name, draft_revision, min(created_at) FROM runs WHERE draft_name IS NOT NULL GROUP BY 1, 2;
ALTER TABLE runs
    DROP CONSTRAINT runs_draft_revision_needs_name,
    ADD CONSTRAINT runs_draft_whole CHECK ((draft_name IS NULL) = (draft_revision IS NULL)),
    ADD CONSTRAINT runs_draft_revision_fkey FOREIGN KEY (draft_name, draft_revision)
        REFERENCES draft_revisions (name, revision);
-- A revision's evaluations, newest first.
CREATE INDEX runs_draft_revision_idx ON runs (draft_name, draft_revision, id) WHERE draft_name IS NOT NULL;

-- A regenerated conversation whose tool calls the source's next turns no longer fit: a call
-- whose arguments changed, answered by the source's result for the old ones; and a call no
-- result answers before the next user turn.
INSERT INTO flag_reasons (code, label, position, selectable, automatic) VALUES
    ('tool_arguments_changed', 'call arguments differ from the source''s result', 16, false, true),
    ('unanswered_tool_call',   'call left unanswered before a user turn',        17, false, true)
ON CONFLICT (code) DO NOTHING;

-- A run that lets the model call tools checks first that its endpoints run a tool parser, with
-- one of the dataset's rows that offer tools.
CREATE INDEX dataset_rows_tools_idx ON dataset_rows (dataset_id) WHERE tools IS NOT NULL;

-- The review list's "longest reasoning" order, paged by (value, id) like the others.
CREATE INDEX samples_reasoning_order_idx ON samples ((COALESCE(reasoning_tokens, -1)), id);
