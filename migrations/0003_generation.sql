-- vLLM endpoints, generation runs, their samples (the work queue) and every try.

CREATE TABLE endpoints (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text        NOT NULL,
    -- The server's root, e.g. http://gpu-7:8000 (the API is under /v1).
    base_url        text        NOT NULL,
    -- Sent as a bearer token; never shown back to a browser.
    api_key         text,
    created_by      bigint      REFERENCES users (id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- What the last connection test saw: [{"id": "...", "max_model_len": 32768}, ...]
    models          jsonb,
    checked_at      timestamptz,
    check_error     text,
    CONSTRAINT endpoints_name_key UNIQUE (name)
);

CREATE TYPE run_status AS ENUM ('running', 'paused', 'completed', 'cancelled');

CREATE TABLE runs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL,
    dataset_id   bigint      NOT NULL REFERENCES datasets (id),
    status       run_status  NOT NULL DEFAULT 'running',
    -- domain::generation::RunSettings
    settings     jsonb       NOT NULL,
    -- domain::generation::Selection
    selection    jsonb       NOT NULL,
    created_by   bigint      REFERENCES users (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    sample_count integer     NOT NULL DEFAULT 0
);
CREATE INDEX runs_active_idx ON runs (id) WHERE status = 'running';

-- Per run and endpoint: the concurrency limit in force and why it last changed. The limit is
-- computed by one worker process at a time (the controller lease) and shared by all of them.
CREATE TABLE run_endpoints (
    run_id              bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    endpoint_id         bigint      NOT NULL REFERENCES endpoints (id),
    concurrency_limit   integer     NOT NULL,
    limit_reason        text        NOT NULL,
    limit_changed_at    timestamptz NOT NULL DEFAULT now(),
    healthy             boolean     NOT NULL DEFAULT true,
    health_changed_at   timestamptz NOT NULL DEFAULT now(),
    controller_owner    uuid,
    controller_until    timestamptz,
    PRIMARY KEY (run_id, endpoint_id)
);

-- Worker processes announce themselves, so a fixed limit can be split between the live ones.
CREATE TABLE workers (
    id           uuid        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TYPE sample_state AS ENUM
    ('pending', 'running', 'ok', 'truncated', 'timed_out', 'failed', 'empty');

CREATE TABLE samples (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id            bigint       NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    row_id            bigint       NOT NULL REFERENCES dataset_rows (id),
    state             sample_state NOT NULL DEFAULT 'pending',
    -- Whether this sample asks the model to think (chat_template_kwargs), fixed at creation.
    thinking          boolean,
    -- The lease of the worker generating it.
    lease_owner       uuid,
    lease_expires_at  timestamptz,
    -- Backoff: a pending sample is not claimed before this time.
    not_before        timestamptz,
    -- Tries that ran to an answer or an error (a try cut short by a dying worker is not one).
    attempts          integer      NOT NULL DEFAULT 0,
    -- The result of the last try; for a failed or timed-out sample, what had arrived by then.
    finish_reason     text,
    reasoning         text,
    content           text,
    -- The conversation as sent and regenerated: [{"role","content","reasoning_content"?}].
    messages          jsonb,
    prompt_tokens     integer,
    completion_tokens integer,
    reasoning_tokens  integer,
    ttft_ms           integer,
    duration_ms       integer,
    endpoint_id       bigint       REFERENCES endpoints (id),
    error             text,
    finished_at       timestamptz,
    CONSTRAINT samples_one_per_row UNIQUE (run_id, row_id),
    CONSTRAINT samples_lease_iff_running CHECK (
        (state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT samples_finished_iff_terminal CHECK (
        (state IN ('pending', 'running')) = (finished_at IS NULL))
);
-- Claiming: the next pending samples of a run in id order.
CREATE INDEX samples_pending_idx ON samples (run_id, id) WHERE state = 'pending';
-- Lease renewal and expiry.
CREATE INDEX samples_running_idx ON samples (lease_owner) WHERE state = 'running';
CREATE INDEX samples_run_state_idx ON samples (run_id, state);

CREATE TABLE sample_attempts (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sample_id         bigint      NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
    -- ok | truncated | empty | error | timed_out | abandoned (the worker died or lost its lease)
    result            text        NOT NULL,
    counted           boolean     NOT NULL,
    endpoint_id       bigint      REFERENCES endpoints (id),
    worker_id         uuid,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz NOT NULL DEFAULT now(),
    http_status       integer,
    error_kind        text,
    error             text,
    finish_reason     text,
    prompt_tokens     integer,
    completion_tokens integer,
    reasoning_tokens  integer,
    ttft_ms           integer,
    duration_ms       integer,
    -- What had arrived when a try failed, kept for review.
    partial_reasoning text,
    partial_content   text
);
CREATE INDEX sample_attempts_sample_idx ON sample_attempts (sample_id, id);
CREATE INDEX sample_attempts_recent_errors_idx ON sample_attempts (finished_at) WHERE error_kind IS NOT NULL;

-- One row per run, endpoint and second: what the dashboard charts.
CREATE TABLE run_metrics (
    run_id             bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    endpoint_id        bigint      NOT NULL REFERENCES endpoints (id),
    at                 timestamptz NOT NULL,
    in_flight          integer     NOT NULL,
    concurrency_limit  integer     NOT NULL,
    completed          integer     NOT NULL,
    errors             integer     NOT NULL,
    client_tokens      integer     NOT NULL,
    -- From the server's /metrics when it has one (NULL otherwise).
    server_prompt_tps     real,
    server_generation_tps real,
    server_running        integer,
    server_waiting        integer,
    server_kv_usage       real,
    server_preemptions    integer,
    PRIMARY KEY (run_id, endpoint_id, at)
);
