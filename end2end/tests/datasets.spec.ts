import { expect, test } from "@playwright/test";
import { admin, hydrated, login, unique } from "./helpers";

/** A small ShareGPT file with a category column, one duplicate and one bad line. */
function datasetFile(): Buffer {
  const lines: string[] = [];
  const categories = ["coding", "math", "writing"];
  for (let i = 0; i < 12; i++) {
    lines.push(
      JSON.stringify({
        id: `e2e-${i}`,
        category: categories[i % 3],
        conversations: [
          { from: "human", value: `How do I approach problem ${i} in a browser test?` },
          { from: "gpt", value: `Break problem ${i} into small steps.` },
        ],
      }),
    );
  }
  lines.push(lines[0].replace('"e2e-0"', '"e2e-dup"')); // same conversation: a duplicate
  lines.push('{"id": "broken", "conversations": ['); // malformed JSON
  return Buffer.from(lines.join("\n") + "\n");
}

test("an engineer uploads a file and sees the dataset page with its counts", async ({ page }) => {
  await login(page, admin.username, admin.password, "/datasets/new");
  await page.goto("/datasets/new");
  await hydrated(page);

  await page.getByTestId("upload-input").setInputFiles({
    name: "browser-chat.jsonl",
    mimeType: "application/x-ndjson",
    buffer: datasetFile(),
  });
  const preview = page.getByTestId("preview");
  await expect(preview).toBeVisible();
  await expect(page.getByTestId("detected-schema")).toContainText("detected: sharegpt");
  await expect(preview).toContainText("How do I approach problem 0");

  const name = unique("e2e-upload-");
  await page.getByLabel("Dataset name").fill(name);
  await page.getByRole("button", { name: "Import" }).click();

  await expect(page).toHaveURL(/\/datasets\/\d+$/);
  await expect(page.getByTestId("dataset-name")).toHaveText(name);
  await expect(page.getByTestId("dataset-status")).toHaveText("ready");
  await expect(page.getByTestId("count-rows")).toHaveText("12");
  await expect(page.getByTestId("count-duplicates")).toHaveText("1");
  await expect(page.getByTestId("count-rejected")).toHaveText("1");
  await expect(page.getByTestId("rejections")).toContainText("line 14");
  await expect(page.getByTestId("rejections")).toContainText("malformed JSON");
  await expect(page.getByTestId("categories")).toContainText("coding");
  await expect(page.getByTestId("rows-table").locator("tbody tr")).toHaveCount(12);

  // Search narrows the row browser.
  await page.getByLabel("Search rows").fill("problem 7 ");
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByTestId("rows-table").locator("tbody tr")).toHaveCount(1);
  await expect(page.getByTestId("rows-table")).toContainText("e2e-7");

  // The list shows it too.
  await page.goto("/datasets");
  await hydrated(page);
  await expect(page.locator(`tr[data-dataset="${name}"]`)).toContainText("12");
});
