import { expect, test } from "@playwright/test";
import { admin, hydrated, login, logout, unique } from "./helpers";

test("an anonymous visitor is sent to sign in, then back to the page they asked for", async ({ page }) => {
  await page.goto("/runs");
  await expect(page).toHaveURL(/\/login\?next=%2Fruns/);
  await hydrated(page);
  await page.getByLabel("Username").fill(admin.username);
  await page.getByLabel("Password").fill(admin.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/runs$/);
  await expect(page.getByTestId("signed-in-user")).toContainText("admin");
});

test("a wrong password is refused with a message", async ({ page }) => {
  await page.goto("/login");
  await hydrated(page);
  await page.getByLabel("Username").fill(admin.username);
  await page.getByLabel("Password").fill("not the password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toContainText("wrong username or password");
  await expect(page).toHaveURL(/\/login/);
});

test("an admin adds a reviewer, who cannot open the Users page", async ({ page }) => {
  await login(page, admin.username, admin.password, "/users");
  await expect(page.getByRole("heading", { name: "Users" })).toBeVisible();

  const reviewer = unique("rev");
  const form = page.getByTestId("add-user");
  await form.getByLabel("Username").fill(reviewer);
  await form.getByLabel("Password").fill("reviewer-password-1");
  await form.getByLabel("Role").selectOption("reviewer");
  await form.getByRole("button", { name: "Add user" }).click();
  const row = page.locator(`tr[data-username="${reviewer}"]`);
  await expect(row).toBeVisible();
  await expect(row.getByLabel("Role")).toHaveValue("reviewer");

  await logout(page);
  await login(page, reviewer, "reviewer-password-1");
  await expect(page.getByTestId("signed-in-user")).toContainText("reviewer");
  // The reviewer sees no Users link...
  await expect(page.getByRole("navigation").getByRole("link", { name: "Users" })).toHaveCount(0);
  // ...and typing the address gets a 403 page, not the user list.
  const response = await page.goto("/users");
  expect(response?.status()).toBe(403);
  await expect(page.getByTestId("forbidden")).toBeVisible();
  await expect(page.getByTestId("users-table")).toHaveCount(0);
});

test("a disabled user is signed out at their next request", async ({ page, browser }) => {
  const name = unique("gone");
  await login(page, admin.username, admin.password, "/users");
  const form = page.getByTestId("add-user");
  await form.getByLabel("Username").fill(name);
  await form.getByLabel("Password").fill("engineer-password-1");
  await form.getByLabel("Role").selectOption("engineer");
  await form.getByRole("button", { name: "Add user" }).click();
  const row = page.locator(`tr[data-username="${name}"]`);
  await expect(row).toBeVisible();

  const other = await browser.newContext();
  const theirPage = await other.newPage();
  await login(theirPage, name, "engineer-password-1");

  page.once("dialog", (dialog) => dialog.accept());
  await row.getByRole("button", { name: "Disable" }).click();
  await expect(row.getByText("disabled")).toBeVisible();

  await theirPage.goto("/runs");
  await expect(theirPage).toHaveURL(/\/login/);
  await other.close();
});
