import { expect, Page, test } from "@playwright/test";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { admin, hydrated, login, logout, unique } from "./helpers";

// Finished samples are written straight into the e2e server's database (as in review.spec.ts):
// what is under test here is exporting them. scripts/test.sh exports the URL.
const databaseUrl = process.env.E2E_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/draft_studio_e2e";

function sql(statement: string): string {
  return execFileSync("psql", [databaseUrl, "-v", "ON_ERROR_STOP=1", "-qtA", "-c", statement], {
    encoding: "utf8",
  }).trim();
}

/** Dollar-quotes a string for SQL (the tag cannot occur in our texts). */
const q = (s: string) => `$q$${s}$q$`;

interface Seed {
  prompt: string;
  reasoning: string;
  answer: string;
}

/** A completed run with one `ok` sample per seed; returns its id and name. */
function seedRun(seeds: Seed[]): { run: number; name: string } {
  const name = unique("e2e-export-");
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
           VALUES (${q(name)}, 'ready', '{"kind":"test"}', 'jsonl', '{"schema":"openai"}', ${seeds.length}) RETURNING id)
         INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at)
         SELECT ${q(name)}, id, 'completed', ${q(settings)}, '{"mode":"all"}', ${seeds.length}, now() FROM ds
         RETURNING id`),
  );
  seeds.forEach((s, i) =>
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
         FROM r`),
  );
  return { run, name };
}

/** An admin adds an engineer through the users API, from a signed-in admin page. */
async function addEngineer(adminPage: Page): Promise<{ username: string; password: string }> {
  const username = unique("eng");
  const password = "engineer-password-1";
  const response = await adminPage.request.post("/api/users/create", {
    form: { username, password, role: "engineer" },
  });
  expect(response.ok()).toBeTruthy();
  return { username, password };
}

test("an engineer saves a preset, exports it in one click and downloads the JSONL", async ({ page }) => {
  const seeds: Seed[] = [0, 1, 2].map((i) => ({
    prompt: `Export question ${i}: what is ${i} times 7?`,
    reasoning: `Seven ${i} times is ${7 * i}.`,
    answer: `It is ${7 * i}.`,
  }));
  const { run } = seedRun(seeds);
  await login(page, admin.username, admin.password, "/");
  const engineer = await addEngineer(page);
  await logout(page);
  await login(page, engineer.username, engineer.password, "/exports");
  await expect(page).toHaveURL(/\/exports$/);
  await hydrated(page);

  // Build the export: the seeded run, into a folder of its own.
  const form = page.getByTestId("export-form");
  await form.locator(`input[name="run"][value="${run}"]`).check();
  const folder = unique("e2e-sets-");
  await form.locator('input[name="folder"]').fill(folder);

  // The preview counts the samples and their tokens before anything is written.
  await page.getByTestId("preview-export").click();
  await expect(page.getByTestId("preview-selected")).toHaveText("3");
  await expect(page.getByTestId("preview-completion-tokens")).toHaveText("120");

  // Save it as a preset; it appears in the presets table.
  const presetName = unique("nightly-");
  await form.getByLabel("Preset name").fill(presetName);
  await page.getByTestId("save-preset").click();
  await expect(page.getByTestId("export-form-ok")).toContainText(`Preset ${presetName} saved`);
  const presetRow = page.locator(`tr[data-preset="${presetName}"]`);
  await expect(presetRow).toBeVisible();

  // One click exports it; the past exports table follows it to completion.
  await presetRow.getByTestId("preset-export").click();
  await expect(page.getByTestId("preset-started")).toContainText("started");
  const started = (await page.getByTestId("preset-started").textContent()) ?? "";
  const id = Number(/Export (\d+) started/.exec(started)?.[1]);
  expect(id).toBeGreaterThan(0);
  const row = page.locator(`tr[data-export="${id}"]`);
  await expect(row).toContainText(presetName);
  await expect(row.getByTestId("export-status")).toHaveText("completed", { timeout: 30_000 });
  await expect(row.getByTestId("export-written")).toHaveText("3");
  await expect(row).toContainText(`${folder}/export-${id}`);

  // The file downloads through the streamed route and holds the seeded conversations.
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    row.getByRole("link", { name: "train.jsonl" }).click(),
  ]);
  expect(download.suggestedFilename()).toBe(`export-${id}-train.jsonl`);
  const text = readFileSync(await download.path(), "utf8");
  const lines = text.trim().split("\n").map((line) => JSON.parse(line));
  expect(lines).toHaveLength(3);
  const byId = new Map(lines.map((l) => [l.id, l]));
  seeds.forEach((s, i) => {
    const line = byId.get(`${run}-row-${i}`);
    expect(line, `row ${i}`).toBeDefined();
    expect(line.conversations).toEqual([
      { role: "user", content: s.prompt },
      { role: "assistant", content: s.answer, reasoning_content: s.reasoning },
    ]);
  });
});
