import { test, expect } from "@playwright/test";
import { admin, hydrated, login, unique } from "./helpers";
import { seedDataset } from "./seed";

// scripts/test.sh starts a vllm-sim for these tests and passes its URL.
const simUrl = process.env.E2E_SIM_URL ?? "http://127.0.0.1:3199";

async function number(text: string | null): Promise<number> {
  return Number((text ?? "").split("/")[0].trim());
}

test("an engineer starts a run and watches it live, pausing and resuming it from the page", async ({ page }) => {
  test.setTimeout(150_000);
  const dataset = unique("prompts-");
  seedDataset(dataset, 400);
  await login(page, admin.username, admin.password, "/endpoints");

  // Register the simulator: the page tests the connection and shows the served model.
  const endpoint = unique("sim-");
  await page.goto("/endpoints");
  await hydrated(page);
  await page.getByLabel("Name").fill(endpoint);
  await page.getByLabel("Base URL").fill(simUrl);
  await page.getByRole("button", { name: "Add and test" }).click();
  const row = page.locator(`tr[data-endpoint="${endpoint}"]`);
  await expect(row).toContainText("sim-model (32768)");
  await expect(row).toContainText("answers");

  // A bad setting is refused with what to change, and nothing starts.
  await page.goto("/runs/new");
  await hydrated(page);
  await page.getByLabel("Name").fill(unique("run-"));
  await page.getByLabel("Dataset").selectOption({ label: `${dataset} (400 rows)` });
  await page.locator(`input[name=endpoint]`).first().uncheck();
  await page.locator(`label.check:has-text("${endpoint}") input`).check();
  await page.getByLabel("Model").fill("sim-model");
  await page.getByLabel("max_tokens").fill("40000");
  await page.getByRole("button", { name: "Start the run" }).click();
  await expect(page.getByTestId("run-error")).toContainText("max_tokens");
  await expect(page).toHaveURL(/\/runs\/new$/);

  await page.getByLabel("max_tokens").fill("512");
  // A fixed, small concurrency: the run lasts long enough to pause and resume it, and a pause
  // drains in seconds.
  await page.getByLabel("Concurrency").selectOption("fixed");
  await page.getByLabel("Requests per endpoint").fill("8");
  await page.getByRole("button", { name: "Start the run" }).click();
  await expect(page).toHaveURL(/\/runs\/\d+$/);
  await hydrated(page);
  await expect(page.getByTestId("run-status")).toHaveText("running");

  // Counters and the chart move without a reload.
  const done = page.getByTestId("kpi-done").locator(".value");
  await expect(done).toContainText("/ 400");
  await expect(page.locator(".live-dot.on")).toHaveCount(1);
  const first = await number(await done.textContent());
  await expect.poll(async () => number(await done.textContent()), { timeout: 30_000 }).toBeGreaterThan(first + 5);
  const chart = page.getByTestId("throughput-chart").locator("svg").first();
  const points = Number(await chart.getAttribute("data-points"));
  await expect.poll(async () => Number(await chart.getAttribute("data-points")), { timeout: 15_000 }).toBeGreaterThan(points);
  await expect(page.getByTestId("run-endpoints")).toContainText(endpoint);
  await page.screenshot({ path: "../docs/screenshots/run-dashboard.png", fullPage: true });

  // Pause: the status changes and, once the tries in flight finish, the count stops.
  await page.getByTestId("pause").click();
  await expect(page.getByTestId("run-status")).toHaveText("paused");
  await expect(page.getByTestId("kpi-running").locator(".value")).toHaveText("0", { timeout: 30_000 });
  const paused = await number(await done.textContent());
  await page.waitForTimeout(2_500);
  expect(await number(await done.textContent())).toBe(paused);

  // Resume: it moves again.
  await page.getByTestId("resume").click();
  await expect(page.getByTestId("run-status")).toHaveText("running");
  await expect.poll(async () => number(await done.textContent()), { timeout: 30_000 }).toBeGreaterThan(paused);

  // The runs list shows it with its progress; cancel so the suite leaves nothing running.
  const runUrl = page.url();
  await page.goto("/runs");
  await hydrated(page);
  await expect(page.getByTestId("runs-table")).toContainText(dataset);
  await page.goto(runUrl);
  await hydrated(page);
  // The run's own part of the page hydrates once its data is read back in the browser, a
  // moment after the page: the live dot turns on only then, and so do the buttons.
  await expect(page.locator(".live-dot.on")).toHaveCount(1);
  page.once("dialog", (d) => d.accept());
  await page.getByTestId("cancel").click();
  await expect(page.getByTestId("run-status")).toHaveText("cancelled");
});
