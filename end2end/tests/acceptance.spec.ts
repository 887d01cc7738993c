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

/** Two completed evaluations of the same `n` prompts: A accepts 3.5 everywhere; B as much on
 * chat and 1.5 on math. Returns their ids. */
function seedTwoEvaluations(n: number): { a: number; b: number; dataset: string } {
  const dataset = unique("acc-ds-");
  seedQuestions(dataset, n);
  const settings = JSON.stringify({ model: "sim-model", endpoint_ids: [], max_tokens: 256 });
  const run = (draft: string, mathAccepted: number) =>
    Number(
      sql(`WITH r AS (
             INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at, draft_name, draft_revision)
             SELECT $q$${unique("eval-")}$q$, id, 'completed', $q$${settings}$q$, '{"mode":"all"}', ${n}, now(), '${draft}', 'r1'
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
  return { a: run("draft-a", 25), b: run("draft-b", 5), dataset };
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
