import { expect, Page } from "@playwright/test";

/** The first admin's credentials, created by scripts/test.sh before the tests run. */
export const admin = {
  username: process.env.E2E_ADMIN_USER ?? "admin",
  password: process.env.E2E_ADMIN_PASSWORD ?? "admin-password-e2e",
};

/** Waits until the page is hydrated: only then do client-side handlers exist. The debug wasm
 * bundle is 12 MB; on a 2-core machine busy compiling, Chromium can take over 15 s to compile
 * and start it (seen in a CI run), hence the longer wait. */
export async function hydrated(page: Page) {
  await expect(page.locator("body[data-hydrated=true]")).toHaveCount(1, { timeout: 45_000 });
}

export async function login(page: Page, username: string, password: string, next = "/") {
  await page.goto(`/login?next=${encodeURIComponent(next)}`);
  await hydrated(page);
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByTestId("signed-in-user")).toContainText(username);
  await hydrated(page);
}

export async function logout(page: Page) {
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login/);
}

/** A name no earlier run of the suite used, so tests can share one database. */
export function unique(prefix: string) {
  return `${prefix}${Date.now().toString(36)}${Math.floor(Math.random() * 1000)}`;
}
