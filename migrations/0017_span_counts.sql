-- A completion's tokens by span, counted from the ids the server streamed (engine::vllm::span_counts):
-- reasoning_tokens now holds that count too, and the server's own figure only when no ids came
-- (vLLM 0.32 left it at 0 on more than half of the samples that hold reasoning). Rows settled
-- before this migration keep the server's figure; NULL where the split is unknown.
ALTER TABLE samples ADD COLUMN answer_tokens integer, ADD COLUMN tool_call_tokens integer;
ALTER TABLE sample_attempts ADD COLUMN answer_tokens integer, ADD COLUMN tool_call_tokens integer;
