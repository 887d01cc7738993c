import { test, expect } from "@playwright/test";
import { admin, hydrated, login, logout, unique } from "./helpers";
import { cancelOpenRun, fillRunForm, registerSim, startFixedRun } from "./flows";
import { addUser, seedDataset, seedRun, sql } from "./seed";

const specs = ["one", "two", "three", "four"].map((n) => ({
  prompt: `Overview prompt ${n}`,
  reasoning: `Thinking about ${n}.`,
  answer: `Answer ${n}.`,
}));

test("a reviewer's overview shows review progress per run and their own queue, live, and no engineering", async ({ page }) => {
  await login(page, admin.username, admin.password);
  const reviewer = await addUser(page, "reviewer");
  const { run, ids } = seedRun(specs, "overview-review-");
  sql(`UPDATE samples SET review_state = 'approved', reviewed_at = now() WHERE id = ${ids[0]}`);
  await logout(page);

  await login(page, reviewer.username, reviewer.password);
  await expect(page.getByRole("heading", { name: "Overview" })).toBeVisible();
  const row = page.getByTestId("overview-review").locator(`tr[data-run="${run}"]`);
  await expect(row.getByTestId("to-review")).toHaveText("3");
  await expect(row.getByTestId("approved")).toHaveText("1");
  await expect(row.getByTestId("rejected")).toHaveText("0");
  const queue = page.getByTestId("my-queue");
  await expect(queue).toContainText("samples wait for review");
  await expect(queue).toContainText("You decided 0 today");
  // A reviewer's page has none of the engineers' sections.
  for (const section of ["overview-runs", "overview-endpoints", "overview-exports"]) {
    await expect(page.getByTestId(section)).toHaveCount(0);
  }

  // A decision elsewhere shows up without a reload.
  sql(`UPDATE samples SET review_state = 'rejected', reviewed_at = now() WHERE id = ${ids[1]}`);
  await expect(row.getByTestId("rejected")).toHaveText("1", { timeout: 15_000 });
  await expect(row.getByTestId("to-review")).toHaveText("2");

  // "Review next" opens the reviewer's queue.
  await queue.getByRole("link", { name: "Review next" }).click();
  await expect(page).toHaveURL(/\/review\/queue/);
});

test("an engineer's overview shows a live run with its rate, the endpoint's load and recent exports", async ({ page }) => {
  test.setTimeout(150_000);
  await login(page, admin.username, admin.password);
  const engineer = await addUser(page, "engineer");
  await logout(page);
  const dataset = unique("overview-prompts-");
  seedDataset(dataset, 300);

  await login(page, engineer.username, engineer.password);
  const endpoint = await registerSim(page);
  await fillRunForm(page, dataset, 300, endpoint, 512);
  const run = await startFixedRun(page, 8);
  const runPage = page.url();

  await page.goto("/");
  await hydrated(page);
  const row = page.getByTestId("overview-runs").locator(`tr[data-run="${run}"]`);
  await expect(row).toContainText("running");
  await expect(row).toContainText(dataset);
  // Progress and rate move without a reload.
  const done = async () => Number(((await row.locator(".progress-cell .small").textContent()) ?? "").split("/")[0].replace(/\D/g, ""));
  const first = await done();
  await expect.poll(done, { timeout: 30_000 }).toBeGreaterThan(first);
  await expect.poll(async () => Number(((await row.getByTestId("run-tps").textContent()) ?? "0").replace(/\D/g, "")), { timeout: 30_000 }).toBeGreaterThan(0);

  const server = page.getByTestId("overview-endpoints").locator(`li[data-endpoint="${endpoint}"]`);
  await expect(server).toContainText("up", { timeout: 15_000 });
  // The endpoint's own limit (shared by the runs on it), not this fixed run's 8.
  await expect(server).toContainText(/limit \d+/);

  // Finished samples of the run wait for review.
  const review = page.getByTestId("overview-review").locator(`tr[data-run="${run}"]`);
  await expect.poll(async () => Number(await review.getByTestId("to-review").textContent()), { timeout: 30_000 }).toBeGreaterThan(0);

  // An export that failed elsewhere appears with its status.
  const exportId = sql(
    `INSERT INTO exports (spec, status, finished_at, error) VALUES ('{}', 'failed', now(), 'seeded by the overview test') RETURNING id`,
  );
  const exportRow = page.getByTestId("overview-exports").locator(`tr[data-export="${exportId}"]`);
  await expect(exportRow).toContainText("failed", { timeout: 15_000 });
  await page.screenshot({ path: "../docs/screenshots/overview.png", fullPage: true });

  await page.goto(runPage);
  await hydrated(page);
  await cancelOpenRun(page);
  await page.goto("/");
  await hydrated(page);
  await expect(page.getByTestId("overview-runs").locator(`tr[data-run="${run}"]`)).toHaveCount(0);
});

test("an admin's overview has every section", async ({ page }) => {
  await login(page, admin.username, admin.password);
  for (const section of ["overview-runs", "overview-endpoints", "overview-review", "overview-exports"]) {
    await expect(page.getByTestId(section)).toBeVisible();
  }
});
