// Steps several specs take through the pages, written once.
import { expect, Page } from "@playwright/test";
import { hydrated, unique } from "./helpers";

// scripts/test.sh starts a vllm-sim for the browser tests and passes its URL.
export const simUrl = process.env.E2E_SIM_URL ?? "http://127.0.0.1:3199";

/** Registers the simulator on the Endpoints page (which tests the connection); returns its name. */
export async function registerSim(page: Page): Promise<string> {
  const endpoint = unique("sim-");
  await page.goto("/endpoints");
  await hydrated(page);
  await page.getByLabel("Name").fill(endpoint);
  await page.getByLabel("Base URL").fill(simUrl);
  await page.getByRole("button", { name: "Add and test" }).click();
  const row = page.locator(`tr[data-endpoint="${endpoint}"]`);
  await expect(row).toContainText("sim-model (32768)");
  await expect(row).toContainText("answers");
  return endpoint;
}

/** Fills the new-run form for `dataset` (of `rows` rows) on `endpoint` only. */
export async function fillRunForm(page: Page, dataset: string, rows: number, endpoint: string, maxTokens: number) {
  await page.goto("/runs/new");
  await hydrated(page);
  await page.getByLabel("Name").fill(unique("run-"));
  await page.getByLabel("Dataset").selectOption({ label: `${dataset} (${rows} rows)` });
  await page.locator(`input[name=endpoint]`).first().uncheck();
  await page.locator(`label.check:has-text("${endpoint}") input`).check();
  await page.getByLabel("Model").fill("sim-model");
  await page.getByLabel("max_tokens").fill(String(maxTokens));
}

/** Sets a fixed concurrency, starts the run and returns its id once its page is open. */
export async function startFixedRun(page: Page, requests: number): Promise<number> {
  await page.getByLabel("Concurrency").selectOption("fixed");
  await page.getByLabel("Requests per endpoint").fill(String(requests));
  await page.getByRole("button", { name: "Start the run" }).click();
  await expect(page).toHaveURL(/\/runs\/\d+$/);
  await hydrated(page);
  await expect(page.getByTestId("run-status")).toHaveText("running");
  return Number(new URL(page.url()).pathname.split("/").pop());
}

/** Cancels the run whose page is open, so the suite leaves nothing running. */
export async function cancelOpenRun(page: Page) {
  // The run's own part of the page hydrates once its data is read back in the browser, a
  // moment after the page: the live dot turns on only then, and so do the buttons.
  await expect(page.locator(".live-dot.on")).toHaveCount(1);
  page.once("dialog", (d) => d.accept());
  await page.getByTestId("cancel").click();
  await expect(page.getByTestId("run-status")).toHaveText("cancelled");
}
