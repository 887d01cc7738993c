-- Personal API tokens: a script acts as the token's owner, with the owner's current role.
-- Only a SHA-256 of the token is kept; the plaintext is shown once, when it is made.

CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text        NOT NULL,
    token_hash   bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    CONSTRAINT api_tokens_name_length CHECK (char_length(name) BETWEEN 1 AND 100),
    CONSTRAINT api_tokens_hash_key UNIQUE (token_hash)
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id, id);
