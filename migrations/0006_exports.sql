-- Export presets and export jobs. Nothing here touches samples: selection reads samples,
-- dataset_rows and runs through their existing indexes (the review filter is wired separately).

CREATE TABLE export_presets (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text        NOT NULL,
    -- domain::export::ExportSpec
    spec        jsonb       NOT NULL,
    created_by  bigint      REFERENCES users (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT export_presets_name_key UNIQUE (name)
);

CREATE TYPE export_status AS ENUM ('running', 'completed', 'failed', 'cancelled');

CREATE TABLE exports (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    preset_id        bigint        REFERENCES export_presets (id) ON DELETE SET NULL,
    -- domain::export::ExportSpec, as run (a preset may change later).
    spec             jsonb         NOT NULL,
    status           export_status NOT NULL DEFAULT 'running',
    created_by       bigint        REFERENCES users (id),
    created_at       timestamptz   NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    -- Progress: samples planned and written so far.
    rows_total       bigint,
    rows_done        bigint        NOT NULL DEFAULT 0,
    -- Set by a user; the job stops at its next batch and removes what it wrote.
    cancel_requested boolean       NOT NULL DEFAULT false,
    -- Once completed: where it landed, its size, the manifest (counts, hashes, provenance).
    location         text,
    bytes            bigint,
    manifest         jsonb,
    error            text,
    CONSTRAINT exports_finished_iff_done CHECK ((status = 'running') = (finished_at IS NULL))
);
CREATE INDEX exports_recent_idx ON exports (id DESC);
CREATE INDEX exports_running_idx ON exports (id) WHERE status = 'running';
