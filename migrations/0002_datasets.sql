-- Source datasets and their normalized rows.

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
    finished_at     timestamptz,
    rows_imported   bigint         NOT NULL DEFAULT 0,
    rows_duplicate  bigint         NOT NULL DEFAULT 0,
    rows_rejected   bigint         NOT NULL DEFAULT 0,
    bytes_read      bigint         NOT NULL DEFAULT 0,
    bytes_total     bigint,
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
