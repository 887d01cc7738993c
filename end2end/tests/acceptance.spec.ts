import { test, expect, Page } from "@playwright/test";
import { admin, hydrated, login, unique } from "./helpers";
import { sql } from "./seed";

// scripts/test.sh starts a simulator serving a draft (weak on prompts about MATH) for these.
const draftSimUrl = process.env.E2E_DRAFT_SIM_URL ?? "http://127.0.0.1:3198";

/** A ready dataset of `n` questions: every third in category `math` and about MATH. */
function seedQuestions(name: string, n: number) {
  sql(`WITH d AS (
         INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ($q$${name}$q$, 'ready', '{"kind":"test"}', 'jsonl', '{"schema":"openai","column":"messages"}', ${n}) RETURNING id)
       INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
       SELECT d.id, 'row-' || i,
              jsonb_build_array(jsonb_build_object('role', 'user', 'content',
                CASE WHEN i % 3 = 0 THEN 'A MATH problem, number ' || i ELSE 'Tell me about topic ' || i END)),
              sha256(('${name}-' || i)::bytea), CASE WHEN i % 3 = 0 THEN 'math' ELSE 'chat' END, 1, 30
       FROM d, generate_series(1, ${n}) AS i`);
}

/** A completed evaluation of `draft@revision` (registered, trained on `trainedOn` when given) of
 * every row of `dataset`: 3.5 accepted per step on chat, `1 + mathAccepted / 10` on math. */
function seedEvaluation(dataset: string, n: number, draft: string, revision: string, mathAccepted: number, trainedOn?: number): number {
  const settings = JSON.stringify({ model: "sim-model", endpoint_ids: [], max_tokens: 256 });
  return Number(
    sql(`INSERT INTO draft_revisions (name, revision, trained_on) VALUES ('${draft}', '${revision}', ${trainedOn ?? "NULL"})
           ON CONFLICT DO NOTHING;
         WITH r AS (
           INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at, draft_name, draft_revision)
           SELECT $q$${unique("eval-")}$q$, id, 'completed', $q$${settings}$q$, '{"mode":"all"}', ${n}, now(), '${draft}', '${revision}'
           FROM datasets WHERE name = $q$${dataset}$q$ RETURNING id, dataset_id),
         s AS (
           INSERT INTO samples (run_id, row_id, state, finish_reason, reasoning, content, messages, prompt_tokens,
                                completion_tokens, reasoning_tokens, duration_ms, finished_at, attempts,
                                spec_steps, spec_accepted, spec_drafted, spec_tokens, spec_histogram)
           SELECT r.id, d.id, 'ok', 'stop', 'thinking', 'an answer',
                  d.messages || '[{"role": "assistant", "content": "an answer"}]'::jsonb, 12, 40, 10, 500, now(), 1,
                  10, CASE WHEN d.category = 'math' THEN ${mathAccepted} ELSE 25 END, 30, 3, '{0,0,0,10}'
           FROM r JOIN dataset_rows d ON d.dataset_id = r.dataset_id RETURNING 1)
         SELECT id FROM r`),
  );
}

/** Two completed evaluations of the same `n` prompts: A accepts 3.5 everywhere; B as much on
 * chat and 1.5 on math. Returns their ids. */
function seedTwoEvaluations(n: number): { a: number; b: number; dataset: string } {
  const dataset = unique("acc-ds-");
  seedQuestions(dataset, n);
  return { a: seedEvaluation(dataset, n, "draft-a", "r1", 25), b: seedEvaluation(dataset, n, "draft-b", "r1", 5), dataset };
}

/** A completed export of run `run` keeping only `category`; returns its id. */
function seedExport(run: number, category: string): number {
  const spec = JSON.stringify({
    selection: { run_ids: [run], review: "not_rejected_or_flagged", categories: [category], weakest: 0.5 },
    format: { layout: "conversations" },
    destination: { kind: "directory", path: "loop" },
    version: 1,
  });
  return Number(
    sql(`INSERT INTO exports (spec, status, finished_at, rows_total, rows_done, location)
         VALUES ($q$${spec}$q$, 'completed', now(), 0, 0, '/tmp/loop') RETURNING id`),
  );
}

async function registerDraftSim(page: Page): Promise<string> {
  const endpoint = unique("draft-sim-");
  await page.goto("/endpoints");
  await hydrated(page);
  await page.getByLabel("Name").fill(endpoint);
  await page.getByLabel("Base URL").fill(draftSimUrl);
  await page.getByRole("button", { name: "Add and test" }).click();
  const row = page.locator(`tr[data-endpoint="${endpoint}"]`);
  await expect(row).toContainText("answers");
  // Its /metrics has spec_decode counters: the page says it runs a draft.
  await expect(row.getByTestId("endpoint-draft")).toContainText("draft");
  return endpoint;
}

test("two drafts compared prompt by prompt: the difference, per category, and the prompts that fell most", async ({ page }) => {
  const { a, b } = seedTwoEvaluations(30);
  await login(page, admin.username, admin.password, "/acceptance");
  await expect(page.getByTestId("evaluations-table")).toContainText("draft-b@r1");

  // Pick A and B on the list and compare.
  const form = page.getByTestId("compare-form");
  await form.locator('select[name="a"]').selectOption(String(a));
  await form.locator('select[name="b"]').selectOption(String(b));
  await form.getByRole("button", { name: "Compare" }).click();
  await expect(page).toHaveURL(new RegExp(`/acceptance/compare\\?a=${a}&b=${b}$`));
  await hydrated(page);

  // 10 of 30 prompts are math: A 3.5 on all; B 1.5 on math, so B − A = (25·20 + 5·10)/300 − 2.5.
  await expect(page.getByTestId("compare-a-length")).toContainText("3.50");
  await expect(page.getByTestId("compare-b-length")).toContainText("2.83");
  await expect(page.getByTestId("compare-difference")).toContainText("−0.67");
  await expect(page.getByTestId("compare-verdict")).toHaveText("B accepts less");
  const categories = page.getByTestId("compare-categories");
  await expect(categories.locator('tr[data-category="math"] .verdict')).toHaveText("B accepts less");
  await expect(categories.locator('tr[data-category="math"]')).toContainText("−2.00");
  await expect(categories.locator('tr[data-category="chat"] .verdict')).toHaveText("no difference shown");
  const drops = page.getByTestId("compare-drops").locator("tbody tr");
  await expect(drops).toHaveCount(10);
  await expect(drops.first()).toContainText("MATH problem");
  await page.screenshot({ path: "../docs/screenshots/acceptance-compare.png", fullPage: true });

  // A prompt where B fell opens B's sample, which shows its own figure.
  await drops.first().getByRole("link").first().click();
  await expect(page).toHaveURL(/\/review\/samples\/\d+/);
  await expect(page.getByTestId("sample-acceptance")).toContainText("1.50 (5 accepted of 30 drafted over 10 steps");

  // B's report: math weakest, and one click into review, weakest first.
  await page.goto(`/acceptance/runs/${b}`);
  await hydrated(page);
  await expect(page.getByTestId("acceptance-overall")).toContainText("2.83");
  const byCategory = page.locator('table[data-dimension="Category"]');
  await expect(byCategory.locator('tr[data-group="math"]')).toContainText("1.50");
  await expect(byCategory.locator('tr[data-group="chat"]')).toContainText("3.50");
  await page.getByTestId("weakest-in-review").click();
  await expect(page).toHaveURL(/sort=lowest_acceptance/);
  await expect(page.getByTestId("samples-table").getByTestId("acceptance").first()).toHaveText("1.50");
  await expect(page.locator('select[name="sort"]')).toHaveValue("lowest_acceptance");
});

test("an engineer evaluates a draft through the form, then a second one on the same prompts", async ({ page }) => {
  test.setTimeout(120_000);
  const dataset = unique("acc-flow-");
  seedQuestions(dataset, 12);
  await login(page, admin.username, admin.password, "/endpoints");
  const endpoint = await registerDraftSim(page);

  // The form: evaluate a named draft on the dataset's rows, on the draft server only.
  await page.goto("/runs/new?purpose=evaluation");
  await hydrated(page);
  await expect(page.getByLabel(/Evaluate a draft/)).toBeChecked();
  await page.getByLabel("Name", { exact: true }).fill(unique("eval-"));
  await page.getByLabel("Draft name").fill("eagle3-tiny");
  await page.getByLabel("Revision").fill("step-100");
  await page.getByLabel("Dataset").selectOption({ label: `${dataset} (12 rows)` });
  await page.locator("input[name=endpoint]").first().uncheck();
  await page.locator(`label.check:has-text("${endpoint}") input`).check();
  await page.getByLabel("Model").fill("sim-model");
  await page.getByLabel("max_tokens").fill("256");
  await page.getByRole("button", { name: "Start the run" }).click();
  await expect(page).toHaveURL(/\/runs\/\d+$/);
  const first = Number(new URL(page.url()).pathname.split("/").pop());
  await hydrated(page);
  await expect(page.getByTestId("run-status")).toHaveText("completed", { timeout: 60_000 });

  // Its acceptance: every sample measured; the MATH prompts, where the draft is weak, lowest.
  await page.getByTestId("run-acceptance").click();
  await expect(page).toHaveURL(new RegExp(`/acceptance/runs/${first}$`));
  await hydrated(page);
  await expect(page.locator("h1")).toContainText("eagle3-tiny@step-100");
  const byCategory = page.locator('table[data-dimension="Category"]');
  const figure = async (group: string) =>
    Number(((await byCategory.locator(`tr[data-group="${group}"] td`).nth(1).textContent()) ?? "").split(" ")[0]);
  expect(await figure("math")).toBeLessThan(await figure("chat"));

  // A second evaluation of the same prompts, from the first run's page.
  await page.goto(`/runs/${first}`);
  await hydrated(page);
  // The run's part of the page hydrates a moment after the page (its data read back): then
  // the live dot turns on, and its links navigate in the page.
  await expect(page.locator(".live-dot.on")).toHaveCount(1);


  await page.getByRole("link", { name: "Evaluate a draft on these prompts" }).click();
  await hydrated(page);
  await expect(page.locator("select[name=selection]")).toHaveValue("run");
  await expect(page.locator("select[name=thinking]")).toHaveValue("as_source");
  await page.getByLabel("Name", { exact: true }).fill(unique("eval-"));
  await page.getByLabel("Draft name").fill("eagle3-tiny");
  await page.getByLabel("Revision").fill("step-200");
  await page.locator("input[name=endpoint]").first().uncheck();
  await page.locator(`label.check:has-text("${endpoint}") input`).check();
  await page.getByLabel("Model").fill("sim-model");
  await page.getByLabel("max_tokens").fill("256");
  await page.getByRole("button", { name: "Start the run" }).click();
  await expect(page).toHaveURL(/\/runs\/\d+$/);
  const second = Number(new URL(page.url()).pathname.split("/").pop());
  await hydrated(page);
  await expect(page.getByTestId("run-status")).toHaveText("completed", { timeout: 60_000 });

  // The same server and prompts: the two agree prompt by prompt.
  await page.goto(`/acceptance/compare?a=${first}&b=${second}`);
  await hydrated(page);
  await expect(page.getByTestId("compare-b")).toContainText("step-200");
  await expect(page.getByTestId("compare-overall")).toContainText("B higher on 0, lower on 0 of 12 prompts");
  await expect(page.getByTestId("compare-verdict")).toHaveText("no difference shown");
});

test("the loop: each revision, the export it was trained on, and its change from the one before", async ({ page }) => {
  const dataset = unique("loop-ds-");
  seedQuestions(dataset, 30);
  const draft = unique("loop-draft-");
  // The start accepts 1.5 on math; v1, trained on everything, the same; v2, trained on math's
  // weakest half, 3.0 there.
  const start = seedEvaluation(dataset, 30, draft, "start", 5);
  const everything = seedExport(start, "chat");
  const weakMath = seedExport(start, "math");
  seedEvaluation(dataset, 30, draft, "v1", 5, everything);
  const v2 = seedEvaluation(dataset, 30, draft, "v2", 20, weakMath);

  await login(page, admin.username, admin.password, "/acceptance");
  await page.getByTestId("loop-link").click();
  await expect(page).toHaveURL(/\/acceptance\/loop$/);
  await hydrated(page);
  await page.locator('[data-testid="loop-form"] select[name="draft"]').selectOption(draft);
  await page.getByTestId("loop-form").getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(new RegExp(`/acceptance/loop\\?draft=${draft}$`));

  const table = page.getByTestId("loop-table");
  await expect(table.locator("thead")).toContainText("chat");
  await expect(table.locator("thead")).toContainText("math");
  const row = (revision: string) => table.locator(`tr[data-revision="${revision}"]`);
  await expect(row("start")).toContainText("starting draft");
  await expect(row("v1").getByTestId("loop-export")).toHaveText(`export ${everything}`);
  await expect(row("v2")).toContainText("categories math · weakest 50% per category");
  // Overall: 2.83 (1.5 on a third of the prompts, 3.5 elsewhere), then 3.33 for v2.
  await expect(row("start").getByTestId("loop-overall")).toContainText("2.83");
  await expect(row("v1").getByTestId("loop-overall")).toContainText("+0.00");
  await expect(row("v2").getByTestId("loop-overall")).toContainText("3.33");
  await expect(row("v2")).toContainText("vs v1: 30 shared prompts");
  // v2's change on math is up, measured (its interval excludes zero); chat unchanged.
  const v2Math = row("v2").getByTestId("loop-category").nth(1);
  await expect(v2Math).toContainText("3.00");
  await expect(v2Math.getByTestId("loop-change")).toContainText("+1.50");
  await expect(v2Math.getByTestId("loop-change")).toHaveClass(/up/);
  await expect(row("v2").getByTestId("loop-category").first().getByTestId("loop-change")).toContainText("+0.00");
  await page.screenshot({ path: "../docs/screenshots/acceptance-loop.png", fullPage: true });

  // The export lists the drafts trained on it and their evaluations; its draft opens the loop.
  await page.goto("/exports");
  await hydrated(page);
  const exportRow = page.locator(`tr[data-export="${weakMath}"]`);
  await expect(exportRow.getByTestId("export-drafts")).toContainText(`${draft}@v2`);
  await expect(exportRow.getByTestId("export-drafts").locator(`a[href="/acceptance/runs/${v2}"]`)).toBeVisible();
  await exportRow.getByTestId("export-draft").click();
  await expect(page).toHaveURL(new RegExp(`/acceptance/loop\\?draft=${draft}$`));
  await expect(page.getByTestId("loop-table")).toContainText("v2");
});
