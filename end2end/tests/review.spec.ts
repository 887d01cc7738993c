import { Browser, expect, Page, test } from "@playwright/test";
import { admin, hydrated, login } from "./helpers";
import { addUser, SampleSpec, seedRun, seedToolRun, sql } from "./seed";

function plain(n: number): SampleSpec[] {
  return Array.from({ length: n }, (_, i) => ({
    prompt: `What is ${i} + ${i}?`,
    reasoning: `Adding ${i} to itself gives ${2 * i}.`,
    answer: `The answer is **${2 * i}**.`,
  }));
}

async function reviewState(page: Page) {
  return page.getByTestId("review-state");
}

async function newReviewer(browser: Browser): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  return page;
}

test("a reviewer judges samples by keyboard alone", async ({ page }) => {
  const { run, ids } = seedRun(plain(3));
  await login(page, admin.username, admin.password, `/review?run=${run}`);
  await expect(page.getByTestId("samples-table").locator("tbody tr")).toHaveCount(3);
  await expect(page.getByTestId("total")).toContainText("3");

  // Enter opens the selected (first) sample.
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/review/samples/${ids[0]}\\?run=${run}$`));
  await expect(await reviewState(page)).toHaveText("unreviewed");

  // a approves; the audit log records it.
  await page.keyboard.press("a");
  await expect(await reviewState(page)).toHaveText("approved");
  await expect(page.getByTestId("audit-log")).toContainText("unreviewed → approved");

  // j goes to the next sample of the list; f, 1, Enter flags it with the first reason.
  await page.keyboard.press("j");
  await expect(page).toHaveURL(new RegExp(`/review/samples/${ids[1]}\\?`));
  await expect(await reviewState(page)).toHaveText("unreviewed");
  await page.keyboard.press("f");
  await expect(page.getByTestId("flag-reasons")).toBeVisible();
  await page.keyboard.press("1");
  await page.keyboard.press("Enter");
  await expect(await reviewState(page)).toHaveText("flagged");
  await expect(page.getByTestId("audit-log")).toContainText("[truncated]");

  // The note's label reads as one line: its key hint sits beside "Note", not on a row of its own.
  const hint = await page.locator("aside.decision label kbd").boundingBox();
  const field = await page.getByTestId("note").boundingBox();
  expect(hint!.width).toBeLessThan(40);
  expect(field!.y - hint!.y).toBeLessThan(60);

  // n writes a note; shortcuts are off while typing ("a" and "r" are just letters there).
  await page.keyboard.press("n");
  await expect(page.getByTestId("note")).toBeFocused();
  await page.keyboard.type("far too short, really");
  await expect(await reviewState(page)).toHaveText("flagged");
  await page.keyboard.press("Escape");
  await expect(page.getByTestId("note")).not.toBeFocused();
  // r rejects, with the note.
  await page.keyboard.press("r");
  await expect(await reviewState(page)).toHaveText("rejected");
  await expect(page.getByTestId("audit-log")).toContainText("far too short, really");

  // u undoes the last decision: back to flagged.
  await page.keyboard.press("u");
  await expect(await reviewState(page)).toHaveText("flagged");
  await expect(page.getByTestId("audit-log").locator("li.undone")).toHaveCount(1);

  // k goes back; ? shows the help, Escape hides it.
  await page.keyboard.press("k");
  await expect(page).toHaveURL(new RegExp(`/review/samples/${ids[0]}\\?`));
  await expect(await reviewState(page)).toHaveText("approved");
  await page.keyboard.press("?");
  await expect(page.getByTestId("help")).toBeVisible();
  await page.keyboard.press("Escape");
  await expect(page.getByTestId("help")).toBeHidden();

  // The list shows the decisions, and the filter in the URL counts them.
  await page.goto(`/review?run=${run}&review=approved`);
  await hydrated(page);
  await expect(page.getByTestId("samples-table").locator("tbody tr")).toHaveCount(1);
  await expect(page.locator(`.facet[data-facet="review"] li.active`)).toContainText("approved");
  await page.goBack();
  await expect(page).toHaveURL(new RegExp(`/review/samples/${ids[0]}`));

  // The list names flags by their labels, and stays within the page however long they are.
  sql(`UPDATE samples SET auto_flags = '{empty_answer,reasoning_only,think_markers}' WHERE id = ${ids[2]}`);
  sql(`UPDATE dataset_rows SET messages = jsonb_build_array(jsonb_build_object('role', 'user',
         'content', repeat('A question that goes on for a while before it asks anything. ', 8)))
       WHERE id = (SELECT row_id FROM samples WHERE id = ${ids[2]})`);
  await page.goto(`/review?run=${run}`);
  await hydrated(page);
  const row = page.locator(`tr[data-sample-id="${ids[2]}"]`);
  await expect(row).toContainText("empty answer, reasoning only, leftover <think> markers");
  const table = await page.getByTestId("samples-table").boundingBox();
  expect(table!.x + table!.width).toBeLessThanOrEqual(page.viewportSize()!.width);
  // And the prompt's preview keeps room to be read, on a 1280 and a 1366 px screen alike.
  for (const width of [1280, 1366]) {
    await page.setViewportSize({ width, height: 800 });
    const preview = await row.locator("td.preview").boundingBox();
    expect(preview!.width, `the preview at ${width} px`).toBeGreaterThanOrEqual(180);
    const wide = await page.getByTestId("samples-table").boundingBox();
    expect(wide!.x + wide!.width).toBeLessThanOrEqual(width);
  }
  // On a narrower screen the facets move above the list, which keeps the page's width.
  await page.setViewportSize({ width: 1024, height: 768 });
  const narrow = await page.getByTestId("samples-table").boundingBox();
  expect(narrow!.x + narrow!.width).toBeLessThanOrEqual(1024);
});

test("two reviewers in two browsers never receive the same sample in queue mode", async ({ browser, page }) => {
  const { run, ids } = seedRun(plain(6));
  await login(page, admin.username, admin.password, "/");
  const people = [await addUser(page, "reviewer"), await addUser(page, "reviewer")];
  const pages = [await newReviewer(browser), await newReviewer(browser)];
  await Promise.all(pages.map((p, i) => login(p, people[i].username, people[i].password, `/review/queue?run=${run}`)));
  // The queue's progress line reads as text, not squeezed into a progress bar's 10 px.
  const line = pages[0].getByTestId("queue-progress");
  await expect(line).toContainText("left to review");
  expect((await line.boundingBox())!.height).toBeGreaterThan(14);

  const seen: number[][] = [[], []];
  const current = async (p: Page) => Number(await p.getByTestId("sample-view").getAttribute("data-sample-id"));
  for (let round = 0; round < 10; round++) {
    const open = await Promise.all(
      pages.map(async (p) => ((await p.getByTestId("queue-empty").count()) > 0 ? null : await current(p))),
    );
    if (open.every((id) => id === null)) break;
    // At any moment the two open samples differ.
    if (open[0] !== null && open[1] !== null) expect(open[0]).not.toBe(open[1]);
    await Promise.all(
      pages.map(async (p, i) => {
        const id = open[i];
        if (id === null) return;
        seen[i].push(id);
        await expect(p.getByTestId("review-state")).toHaveText("unreviewed");
        await p.keyboard.press("a");
        // The next sample (or the empty queue) replaces this one.
        // (Read without waiting: once the queue is empty no sample view comes back.)
        await expect(async () => {
          const empty = (await p.getByTestId("queue-empty").count()) > 0;
          const shown = await p
            .getByTestId("sample-view")
            .evaluateAll((views) => views.map((v) => Number(v.getAttribute("data-sample-id"))));
          expect(empty || (shown.length === 1 && shown[0] !== id)).toBeTruthy();
        }).toPass({ timeout: 15_000 });
      }),
    );
  }
  const all = [...seen[0], ...seen[1]];
  expect(new Set(all).size).toBe(all.length);
  expect(all.sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
  expect(seen[0].length).toBeGreaterThan(0);
  expect(seen[1].length).toBeGreaterThan(0);
  for (const p of pages) {
    await expect(p.getByTestId("queue-empty")).toBeVisible();
    await p.context().close();
  }
});

test("script payloads in model output are inert", async ({ page }) => {
  const payload = [
    "Here is some **markdown** and then trouble:",
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "[click me](javascript:window.__pwned=3)",
    '<a href="javascript:window.__pwned=4">or me</a>',
    '<iframe src="javascript:window.__pwned=5"></iframe>',
    '<svg onload="window.__pwned=6"></svg>',
    '<div onmouseover="window.__pwned=7">hover</div>',
  ].join("\n\n");
  const { run, ids } = seedRun([
    {
      prompt: '<img src=x onerror="window.__pwned = 8"> please <script>window.__pwned=9</script>',
      reasoning: "<script>window.__pwned = 10</script> thinking",
      answer: payload,
    },
  ]);
  const dialogs: string[] = [];
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    d.dismiss();
  });
  await login(page, admin.username, admin.password, `/review?run=${run}`);
  // The list shows the prompt as text.
  await expect(page.getByTestId("samples-table")).toContainText("please <script>");
  await page.goto(`/review/samples/${ids[0]}`);
  await hydrated(page);
  const answer = page.getByTestId("answer");
  await expect(answer).toContainText("trouble");
  await expect(answer.locator("strong")).toHaveText("markdown");
  for (const selector of ["script", "img", "iframe", "svg", "[onerror]", "[onload]", "[onmouseover]", 'a[href^="javascript"]']) {
    await expect(answer.locator(selector), selector).toHaveCount(0);
  }
  // Nowhere on the page either (the reasoning and the prompt are text).
  for (const selector of ["iframe", "[onerror]", "[onload]", "[onmouseover]", 'a[href^="javascript"]', "img"]) {
    await expect(page.locator(selector), selector).toHaveCount(0);
  }
  // No script element carries a payload as code. The hydration data (a JSON string inside
  // Leptos's own script) does hold the sample's text, escaped, which is data, not code.
  const codeScripts = await page.locator("script").evaluateAll((els) =>
    els.filter((e) => /^\s*window\.__pwned/.test(e.textContent ?? "")).length,
  );
  expect(codeScripts).toBe(0);
  // Clicking what is left of the links does nothing.
  await answer.getByText("click me").click();
  await answer.getByText("or me").click();
  await answer.getByText("hover").hover();
  await page.getByTestId("reasoning").locator("summary").click();
  await expect(page.getByTestId("reasoning")).toContainText("<script>window.__pwned = 10</script>");
  // The raw view shows the payload as the model wrote it, as text.
  await page.keyboard.press("v");
  await expect(page.getByTestId("answer-raw")).toContainText("<script>window.__pwned = 1</script>");
  await expect(page.getByTestId("answer-raw").locator("script, img, iframe")).toHaveCount(0);
  expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
  expect(dialogs).toEqual([]);
});

test("the training view shows which tokens the draft model learns from", async ({ page }) => {
  const { ids } = seedRun([{ prompt: "What is 6 times 7?", reasoning: "6 times 7 is 42.", answer: "It is 42." }], "training-view-");
  await login(page, admin.username, admin.password, `/review/samples/${ids[0]}`);
  const panel = page.getByTestId("training-view");
  // scripts/test.sh copies a fixture tokenizer (a Qwen-style chat template) under the
  // server's export root; the sample has no captured ids, so the row is re-tokenized.
  await panel.getByLabel("Tokenizer folder").fill(process.env.E2E_TOKENIZER_DIR ?? "tokenizers/qwen");
  await panel.getByRole("button", { name: "Show" }).click();
  await expect(panel.getByTestId("training-summary")).toContainText("re-tokenized with the chat template");
  const supervised = (await panel.locator(".tok.sup").allTextContents()).join("");
  const unsupervised = (await panel.locator(".tok:not(.sup)").allTextContents()).join("");
  // The answer (and the reasoning before it) are learned; the prompt is context only.
  expect(supervised).toContain("It is 42.");
  expect(supervised).toContain("6 times 7 is 42.");
  expect(unsupervised).toContain("What is 6 times 7?");
  expect(supervised).not.toContain("What is 6 times 7?");
});

test("a tool conversation shows its tools, its calls and the source's results", async ({ page }) => {
  const { run, id } = seedToolRun();
  await login(page, admin.username, admin.password, `/review/samples/${id}?run=${run}`);
  await hydrated(page);

  // The tool definitions are folded, and open on a click.
  const tools = page.getByTestId("tools");
  await expect(tools).toContainText("Tools offered · get_weather");
  await expect(tools.locator("pre")).toBeHidden();
  await tools.locator("summary").click();
  await expect(tools.locator("pre")).toContainText('"parameters"');

  // Each call: its function's name and its arguments pretty-printed; the history's call first.
  const calls = page.getByTestId("tool-call");
  await expect(calls).toHaveCount(2);
  await expect(page.getByTestId("tool-name")).toHaveText(["get_weather", "lookup_stock"]);
  await expect(calls.nth(0).getByTestId("tool-arguments")).toHaveText('{\n  "city": "Paris"\n}');
  await expect(calls.nth(0)).not.toContainText("not a JSON object");
  // The generated call's arguments are not JSON: shown as written, and marked.
  await expect(calls.nth(1).getByTestId("tool-arguments")).toHaveText("{ticker: ACME");
  await expect(calls.nth(1)).toContainText("arguments are not a JSON object");

  // The tool result is the source's, in a monospace block.
  const result = page.getByTestId("tool-result");
  await expect(result).toContainText("tool result · from the source");
  await expect(result).toContainText("answers chatcmpl-tool-a");
  const block = result.locator("pre");
  await expect(block).toHaveText('{"temperature": 18, "sky": "clear"}');
  expect(await block.evaluate((el) => getComputedStyle(el).fontFamily)).toMatch(/mono/i);

  // The automatic flags, and the tokens by span.
  await expect(page.locator("header.sample-head")).toContainText("bad_tool_arguments");
  await expect(page.locator("header.sample-head")).toContainText("unknown_tool");
  await expect(page.getByTestId("tool-call-tokens")).toHaveText("28");
  await expect(page.getByTestId("answer-tokens")).toHaveText("3");
});

test("a bulk action confirms its count, and the same action again changes nothing", async ({ page }) => {
  const { run, ids } = seedRun(plain(3));
  await login(page, admin.username, admin.password, `/review?run=${run}`);
  await expect(page.getByTestId("samples-table").locator("tbody tr")).toHaveCount(3);
  const questions: string[] = [];
  page.on("dialog", (dialog) => {
    questions.push(dialog.message());
    void dialog.accept();
  });
  const bulk = page.getByTestId("bulk");
  await bulk.locator("summary").click();
  await bulk.locator("select").first().selectOption("approve");
  await bulk.getByRole("button", { name: "Count and confirm…" }).click();
  await expect(bulk.getByRole("status")).toHaveText("3 samples changed.");
  expect(questions[0]).toContain("Approve 3 finished samples");

  // A second click (as a retry would) finds every sample already approved: no change, no event.
  await bulk.getByRole("button", { name: "Count and confirm…" }).click();
  await expect(bulk.getByRole("status")).toHaveText("0 samples changed; 3 already had this decision.");
  const events = sql(`SELECT count(*) FROM review_events WHERE sample_id IN (${ids.join(",")})`);
  expect(events).toBe("3");
});
