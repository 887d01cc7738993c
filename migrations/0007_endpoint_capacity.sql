-- The adaptive concurrency limit belongs to a server, not to a run: runs on one endpoint share
-- it by weight. One row per endpoint: its limit and why it last changed (computed by one worker
-- process at a time, the controller lease), whether it serves, and its load as last read.

CREATE TABLE endpoint_capacity (
    endpoint_id           bigint      PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    concurrency_limit     integer     NOT NULL CHECK (concurrency_limit > 0),
    limit_reason          text        NOT NULL,
    limit_changed_at      timestamptz NOT NULL DEFAULT now(),
    controller_owner      uuid,
    controller_until      timestamptz,
    healthy               boolean     NOT NULL DEFAULT true,
    -- Why it is down, while it is.
    health_reason         text,
    health_changed_at     timestamptz NOT NULL DEFAULT now(),
    server_running        integer,
    server_waiting        integer,
    server_kv_usage       real,
    server_generation_tps real,
    observed_at           timestamptz
);

-- The runs on an endpoint, for the split and the Endpoints page.
CREATE INDEX run_endpoints_endpoint_idx ON run_endpoints (endpoint_id, run_id);
