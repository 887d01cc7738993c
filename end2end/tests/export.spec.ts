import { expect, test } from "@playwright/test";
import { readFileSync } from "node:fs";
import { admin, hydrated, login, logout, unique } from "./helpers";
import { addUser, SampleSpec, seedRun } from "./seed";

test("an engineer saves a preset, exports it in one click and downloads the JSONL", async ({ page }) => {
  const seeds: SampleSpec[] = [0, 1, 2].map((i) => ({
    prompt: `Export question ${i}: what is ${i} times 7?`,
    reasoning: `Seven ${i} times is ${7 * i}.`,
    answer: `It is ${7 * i}.`,
  }));
  const { run } = seedRun(seeds, "e2e-export-");
  await login(page, admin.username, admin.password, "/");
  const engineer = await addUser(page, "engineer");
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
  // Sent with the server's default thinking mode, they are counted as neither thinking nor not.
  await expect(page.getByTestId("preview-thinking")).toHaveText("0 / 0 / 3");

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

test("an engineer exports for a trainer, and the form says how that trainer loads it", async ({ page }) => {
  const { run } = seedRun(
    [0, 1].map((i) => ({ prompt: `Trainer question ${i}?`, reasoning: `Think ${i}.`, answer: `Answer ${i}.` })),
    "e2e-trainer-",
  );
  await login(page, admin.username, admin.password, "/exports");
  await hydrated(page);
  const form = page.getByTestId("export-form");
  await form.locator(`input[name="run"][value="${run}"]`).check();
  const folder = unique("e2e-trainer-sets-");
  await form.locator('input[name="folder"]').fill(folder);

  // Choosing SpecForge's offline trainer fixes the rows: the layout choices give way to how it loads.
  await expect(form.locator('select[name="layout"]')).toBeVisible();
  await form.locator('select[name="trainer"]').selectOption("specforge_offline");
  await expect(form.locator('select[name="layout"]')).toHaveCount(0);
  await expect(page.getByTestId("trainer-load")).toContainText("prepare_hidden_states.py");
  await expect(page.getByTestId("trainer-load")).toContainText("--chat-template qwen3.5");

  await page.getByTestId("export-now").click();
  await expect(page.getByTestId("export-form-ok")).toContainText("started");
  const started = (await page.getByTestId("export-form-ok").textContent()) ?? "";
  const id = Number(/Export (\d+) started/.exec(started)?.[1]);
  const row = page.locator(`tr[data-export="${id}"]`);
  await expect(row.getByTestId("export-status")).toHaveText("completed", { timeout: 30_000 });
  await expect(row).toContainText("SpecForge (offline hidden states)");
  const [download] = await Promise.all([
    page.waitForEvent("download"),
    row.getByRole("link", { name: "train.jsonl" }).click(),
  ]);
  const lines = readFileSync(await download.path(), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  expect(lines).toHaveLength(2);
  for (const line of lines) {
    // SpecForge's offline loader needs `tools` on every row: JSON text, "[]" when none is offered.
    expect(line.tools).toBe("[]");
    expect(line.conversations[1].reasoning_content).toMatch(/^Think \d\.$/);
  }
});
