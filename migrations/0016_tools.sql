-- Tool calling: the functions a dataset row offers, and the automatic flags for generated calls.

-- The row's tools in OpenAI's shape, [{"type": "function", "function": {"name", ...}}]; NULL
-- when it offers none. Part of the row's content hash when present.
ALTER TABLE dataset_rows ADD COLUMN tools jsonb;

INSERT INTO flag_reasons (code, label, position, selectable, automatic) VALUES
    ('bad_tool_arguments',   'tool arguments not JSON',             13, false, true),
    ('unknown_tool',         'calls an unknown tool',               14, false, true),
    ('tool_result_mismatch', 'call differs from the source''s result', 15, false, true)
ON CONFLICT (code) DO NOTHING;
