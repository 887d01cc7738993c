import { test, expect } from "@playwright/test";
import { admin, hydrated, login, unique } from "./helpers";
import { cancelOpenRun, fillRunForm, registerSim, startFixedRun } from "./flows";
import { seedDataset } from "./seed";

async function number(text: string | null): Promise<number> {
  return Number((text ?? "").split("/")[0].trim());
}

test("an engineer starts a run and watches it live, pausing and resuming it from the page", async ({ page }) => {
  test.setTimeout(150_000);
  const dataset = unique("prompts-");
  seedDataset(dataset, 400);
  await login(page, admin.username, admin.password, "/endpoints");

  // Register the simulator: the page tests the connection and shows the served model.
  const endpoint = await registerSim(page);

  // A bad setting is refused with what to change, and nothing starts.
  await fillRunForm(page, dataset, 400, endpoint, 40000);
  await page.getByRole("button", { name: "Start the run" }).click();
  await expect(page.getByTestId("run-error")).toContainText("max_tokens");
  await expect(page).toHaveURL(/\/runs\/new$/);

  await page.getByLabel("max_tokens").fill("512");
  // A fixed, small concurrency: the run lasts long enough to pause and resume it, and a pause
  // drains in seconds.
  await startFixedRun(page, 8);

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
  // Until the tries in flight have finished, the page says they are still running.
  await expect(page.getByTestId("pause-draining")).toContainText("still running");
  await expect(page.getByTestId("kpi-running").locator(".value")).toHaveText("0", { timeout: 30_000 });
  await expect(page.getByTestId("pause-draining")).toHaveCount(0);
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
  await cancelOpenRun(page);
});

test("a finished run's page opened by its address hydrates, and its links open in the page", async ({ page }) => {
  test.setTimeout(90_000);
  const dataset = unique("done-");
  seedDataset(dataset, 6);
  await login(page, admin.username, admin.password, "/endpoints");
  const endpoint = await registerSim(page);
  await fillRunForm(page, dataset, 6, endpoint, 64);
  const run = await startFixedRun(page, 8);
  await expect(page.getByTestId("run-status")).toHaveText("completed", { timeout: 60_000 });

  // Opened by its address: the server renders it whole, the browser hydrates it without error
  // (the selection-bias section streamed in after the page once broke hydration there, and the
  // page's links and buttons went dead).
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`/runs/${run}`);
  await hydrated(page);
  await expect(page.getByTestId("bias")).toBeVisible();
  await expect(page.locator(".live-dot.on")).toHaveCount(1);
  await page.getByTestId("run-acceptance").click();
  await expect(page).toHaveURL(new RegExp(`/acceptance/runs/${run}$`));
  await expect(page.getByTestId("no-acceptance")).toContainText("runs no draft");
  expect(errors).toEqual([]);
});
