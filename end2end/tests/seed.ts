// Test data written straight into the e2e server's database: generating samples would need a
// vLLM server, and what the review and export specs test is what happens after generation.
// scripts/test.sh exports the database URL.
import { expect, Page } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { unique } from "./helpers";

const databaseUrl = process.env.E2E_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/draft_studio_e2e";

/** Runs one statement; returns what it printed (unaligned, tuples only). */
export function sql(statement: string): string {
  return execFileSync("psql", [databaseUrl, "-v", "ON_ERROR_STOP=1", "-qtA", "-c", statement], {
    encoding: "utf8",
  }).trim();
}

/** Dollar-quotes a string for SQL (the tag cannot occur in our texts). */
const q = (s: string) => `$q$${s}$q$`;

export interface SampleSpec {
  prompt: string;
  reasoning: string;
  answer: string;
}

/** A ready dataset of `n` conversations in two categories (math, chat). */
export function seedDataset(name: string, n: number) {
  sql(`WITH d AS (
         INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES (${q(name)}, 'ready', '{"kind":"test"}', 'jsonl', '{"schema":"openai","column":"messages"}', ${n}) RETURNING id)
       INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
       SELECT d.id, 'row-' || i,
              jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'Explain topic ' || i || ' step by step.')),
              sha256(('row-' || i)::bytea), CASE WHEN i % 3 = 0 THEN 'math' ELSE 'chat' END, 1, 30
       FROM d, generate_series(1, ${n}) AS i`);
}

/** A completed run with one finished `ok` sample per spec; returns the run id, its name and
 * the sample ids in spec order. */
export function seedRun(specs: SampleSpec[], prefix = "e2e-run-"): { run: number; name: string; ids: number[] } {
  const name = unique(prefix);
  const settings = JSON.stringify({
    model: "sim-model",
    endpoint_ids: [],
    max_tokens: 256,
    temperature: null,
    top_p: null,
    seed: null,
    system_prompt: null,
    thinking: { mode: "server_default" },
    turns: "last_assistant",
    concurrency: { mode: "adaptive", min: 4, max: 512 },
    idle_timeout_secs: 120,
    deadline_secs: null,
    max_attempts: 5,
    stream_interval: 16,
  });
  const run = Number(
    sql(`WITH ds AS (
           INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
           VALUES (${q(name)}, 'ready', '{"kind":"test"}', 'jsonl', '{"schema":"openai","column":"messages"}', ${specs.length}) RETURNING id)
         INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at)
         SELECT ${q(name)}, id, 'completed', ${q(settings)}, '{"mode":"all"}', ${specs.length}, now() FROM ds
         RETURNING id`),
  );
  const ids = specs.map((s, i) =>
    Number(
      sql(`WITH r AS (
             INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
             SELECT dataset_id, 'row-${i}', jsonb_build_array(jsonb_build_object('role', 'user', 'content', ${q(s.prompt)}::text)),
                    decode(md5(${q(name)} || '${i}'), 'hex'), 'e2e', 1, length(${q(s.prompt)})
             FROM runs WHERE id = ${run} RETURNING id, messages)
           INSERT INTO samples (run_id, row_id, state, finish_reason, reasoning, content, messages, prompt_tokens,
                                completion_tokens, reasoning_tokens, ttft_ms, duration_ms, finished_at, attempts)
           SELECT ${run}, r.id, 'ok', 'stop', ${q(s.reasoning)}, ${q(s.answer)},
                  r.messages || jsonb_build_array(jsonb_build_object('role', 'assistant', 'content', ${q(s.answer)}::text,
                                                                    'reasoning_content', ${q(s.reasoning)}::text)),
                  12, 40, 25, 80, 900, now(), 1
           FROM r RETURNING id`),
    ),
  );
  return { run, name, ids };
}

/** A completed run regenerating an agent conversation turn by turn: the row offers a weather
 * function; the history holds a call and the source's tool result; the generated turn calls a
 * function the row does not offer, with arguments that are not JSON (both flagged
 * automatically). Returns the run and sample ids. */
export function seedToolRun(): { run: number; id: number } {
  const name = unique("e2e-tools-");
  const tools = JSON.stringify([{ type: "function", function: { name: "get_weather", description: "The weather of a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }]);
  const source = JSON.stringify([
    { role: "user", content: "Is it warm in Paris?" },
    { role: "assistant", content: "", tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
    { role: "tool", tool_call_id: "call_1", content: "{\"temperature\": 18, \"sky\": \"clear\"}" },
    { role: "assistant", content: "It is 18 °C." },
  ]);
  const generated = JSON.stringify([
    { role: "user", content: "Is it warm in Paris?" },
    { role: "assistant", content: "", tool_calls: [{ id: "chatcmpl-tool-a", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
    { role: "tool", tool_call_id: "chatcmpl-tool-a", content: "{\"temperature\": 18, \"sky\": \"clear\"}" },
    { role: "assistant", content: "", tool_calls: [{ id: "chatcmpl-tool-b", type: "function", function: { name: "lookup_stock", arguments: "{ticker: ACME" } }] },
  ]);
  const settings = JSON.stringify({
    model: "sim-model", endpoint_ids: [], max_tokens: 256, temperature: null, top_p: null, seed: null,
    system_prompt: null, thinking: { mode: "off" }, turns: "every_assistant",
    concurrency: { mode: "adaptive", min: 4, max: 512 }, idle_timeout_secs: 120, deadline_secs: null,
    max_attempts: 5, stream_interval: 16, tool_choice: "auto", parallel_tool_calls: true,
  });
  const run = Number(
    sql(`WITH ds AS (
           INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
           VALUES (${q(name)}, 'ready', '{"kind":"test"}', 'jsonl', '{"schema":"openai","column":"messages","tools_column":"tools"}', 1) RETURNING id)
         INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at)
         SELECT ${q(name)}, id, 'completed', ${q(settings)}, '{"mode":"all"}', 1, now() FROM ds
         RETURNING id`),
  );
  const id = Number(
    sql(`WITH r AS (
           INSERT INTO dataset_rows (dataset_id, row_key, messages, tools, content_hash, category, turn_count, prompt_chars)
           SELECT dataset_id, 'agent-0', ${q(source)}::jsonb, ${q(tools)}::jsonb, decode(md5(${q(name)}), 'hex'), 'agent', 4, 20
           FROM runs WHERE id = ${run} RETURNING id)
         INSERT INTO samples (run_id, row_id, state, finish_reason, reasoning, content, messages, prompt_tokens,
                              completion_tokens, reasoning_tokens, answer_tokens, tool_call_tokens, auto_flags,
                              ttft_ms, duration_ms, finished_at, attempts)
         SELECT ${run}, r.id, 'ok', 'tool_calls', '', '', ${q(generated)}::jsonb, 120, 31, 0, 3, 28,
                ARRAY['bad_tool_arguments', 'unknown_tool'], 80, 900, now(), 1
         FROM r RETURNING id`),
  );
  return { run, id };
}

/** An admin adds a user with `role` through the users API, from a signed-in admin page. */
export async function addUser(adminPage: Page, role: "reviewer" | "engineer"): Promise<{ username: string; password: string }> {
  const username = unique(role.slice(0, 3));
  const password = `${role}-password-1`;
  const response = await adminPage.request.post("/api/users/create", {
    form: { username, password, role },
  });
  expect(response.ok()).toBeTruthy();
  return { username, password };
}
