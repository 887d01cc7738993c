-- Source datasets and their normalized rows.

-- A dataset is usable only when 'ready'; an import that failed or was cancelled keeps its
-- record (and its reason) but never its rows.
CREATE TYPE dataset_status AS ENUM ('importing', 'ready', 'failed', 'cancelled');

CREATE TABLE datasets (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text           NOT NULL,
    status          dataset_status NOT NULL DEFAULT 'importing',
    -- Where the rows came from: {"kind":"path","path":...} | {"kind":"upload","filename":...}
    -- | {"kind":"hub","repo":...,"config":...,"split":...}
    source          jsonb          NOT NULL,
    format          text           NOT NULL,   -- jsonl | jsonl.gz | json | parquet
    -- The schema mapping used: {"schema":"sharegpt"|"openai"|"alpaca"|"prompt", "id_column":..., ...}
    mapping         jsonb          NOT NULL,
    created_by      bigint         REFERENCES users (id),
    created_at      timestamptz    NOT NULL DEFAULT now(),
    -- Last sign of life of the import job; an 'importing' dataset whose job stopped beating is
    -- marked failed at the next start-up.
    progress_at     timestamptz    NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    rows_imported   bigint         NOT NULL DEFAULT 0,
    rows_duplicate  bigint         NOT NULL DEFAULT 0,
    rows_rejected   bigint         NOT NULL DEFAULT 0,
    bytes_read      bigint         NOT NULL DEFAULT 0,
    bytes_total     bigint,
    -- Computed once when the import finishes: rows per category, turn and prompt-length histograms.
    stats           jsonb,
    error           text,
    CONSTRAINT datasets_name_key UNIQUE (name)
);

CREATE TABLE dataset_rows (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset_id    bigint  NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    -- Stable id: the source's id column, or the content hash in hex.
    row_key       text    NOT NULL,
    -- Normalized conversation: [{"role":"system"|"user"|"assistant","content":"..."}]
    messages      jsonb   NOT NULL,
    content_hash  bytea   NOT NULL,
    category      text,
    turn_count    integer NOT NULL,
    -- Characters of the prompt part (everything before the last assistant turn).
    prompt_chars  integer NOT NULL,
    CONSTRAINT dataset_rows_key UNIQUE (dataset_id, row_key),
    CONSTRAINT dataset_rows_hash UNIQUE (dataset_id, content_hash)
);
CREATE INDEX dataset_rows_category_idx ON dataset_rows (dataset_id, category);
-- The row browser pages by (dataset_id, id).
CREATE INDEX dataset_rows_page_idx ON dataset_rows (dataset_id, id);

-- Rows an import refused, with where they were and why (the first 1,000 per dataset).
CREATE TABLE dataset_rejections (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset_id  bigint NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    location    text   NOT NULL,   -- "line 12", "row 40", "file 2, row 7"
    reason      text   NOT NULL
);
CREATE INDEX dataset_rejections_dataset_idx ON dataset_rejections (dataset_id, id);
