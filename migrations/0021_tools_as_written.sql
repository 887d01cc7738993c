-- A row's tools keep the text the source wrote, key order included (issue 46).
--
-- jsonb sorts an object's keys, and the order of a tool's keys is part of the prompt: a chat
-- template writes `tools | tojson` as the dict came, vLLM hands a tool's `parameters` to the
-- template in the order the request sent them, and a trainer renders the exported row's tools in
-- the order they are written. `json` stores the text as given. Rows imported before this keep the
-- sorted order jsonb gave them: their source order is gone; import the dataset again to get it.
-- Nothing queries inside the column, so no index is lost.
ALTER TABLE dataset_rows ALTER COLUMN tools TYPE json USING tools::json;
