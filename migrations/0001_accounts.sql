-- Accounts and browser sessions.

CREATE TYPE user_role AS ENUM ('reviewer', 'engineer', 'admin');

CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username      text        NOT NULL,
    password_hash text        NOT NULL,
    role          user_role   NOT NULL,
    disabled      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    last_login_at timestamptz,
    CONSTRAINT users_username_format CHECK (username ~ '^[a-z0-9][a-z0-9._-]{1,62}$'),
    CONSTRAINT users_username_key UNIQUE (username)
);

-- Read and written by tower-sessions-sqlx-store (PostgresStore with this table name).
CREATE TABLE sessions (
    id          text        PRIMARY KEY,
    data        bytea       NOT NULL,
    expiry_date timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_date_idx ON sessions (expiry_date);
