-- The token ids the server saw and produced (vLLM's `return_token_ids`) for a sample's last
-- settled try: one row per request (a conversation regenerated turn by turn has one per turn),
-- each list bit-packed at the width its largest id needs (engine::generation::token_ids).
-- Exports build pre-tokenized rows from these: exactly what the target model saw and wrote.

CREATE TABLE sample_tokens (
    sample_id      bigint   NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
    turn           smallint NOT NULL CHECK (turn >= 0),
    prompt_ids     bytea    NOT NULL,
    completion_ids bytea    NOT NULL,
    PRIMARY KEY (sample_id, turn)
);
-- Packed ids do not compress: keep them out of line without trying.
ALTER TABLE sample_tokens
    ALTER COLUMN prompt_ids SET STORAGE EXTERNAL,
    ALTER COLUMN completion_ids SET STORAGE EXTERNAL;

-- Whether the sample's last settled answer came with the server's token ids: true, false (the
-- server does not return them), NULL (no answer yet, or the try failed).
ALTER TABLE samples ADD COLUMN captured_token_ids boolean;
