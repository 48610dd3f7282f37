// Signing in to the dashboard: a full access key opens it, a sending key and an unknown key are told
// why not, the key stays in the tab's sessionStorage only, and signing out forgets it. The pages come
// with a strict Content-Security-Policy. A list page's changes (suppressions) show the API's refusal.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.skipIf(!chromiumPresent)('signing in to the dashboard', () => {
  let browser: Browser;
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('serves every dashboard path as the app, with a CSP that allows no inline or foreign script', async () => {
    for (const path of ['/dashboard', '/dashboard/contacts', '/dashboard/emails/0d3c0a5e-1b7a-4c11-9e55-8c3f1f3f0e2a']) {
      const response = await fetch(server.url + path);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = response.headers.get('content-security-policy')!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/script-src[^;]*(unsafe-inline|unsafe-eval|\*)/);
      expect(csp).toContain("frame-ancestors 'none'");
    }
  });

  it('opens with a full access key, keeps it in the tab only, and forgets it on sign-out', async () => {
    const page = await openSignedIn(browser, server.url, server.apiKey);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Contacts');
    expect(await page.evaluate(() => Object.values(sessionStorage))).toContain(server.apiKey);
    expect(await page.evaluate(() => Object.values(localStorage))).toEqual([]);
    expect(await page.context().cookies()).toEqual([]);
    // Another tab of the same browser does not share it.
    const other = await page.context().newPage();
    await other.goto(`${server.url}/dashboard/contacts`);
    await other.getByLabel('API key').waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([]);
    await page.context().close();
  });

  it('works from the keyboard: sign in, move between sections, fill a form and submit it', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard/segments`);
    await page.getByLabel('API key').waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id && document.querySelector(`label[for="${document.activeElement.id}"]`)?.textContent)).toBe('API key');
    await page.keyboard.type(server.apiKey);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Segments', level: 1 }).waitFor();
    // The sign-in form gone, the page's heading has the focus, as after any move to a page.
    const focused = () => page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.textContent}`);
    await expect.poll(focused).toBe('H1 Segments');
    // From the top of the page (reloaded: the key stays in the tab), the skip link comes first, then the sections; Enter on one follows it.
    await page.reload();
    await page.getByRole('heading', { name: 'Segments', level: 1 }).waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Contacts', level: 1 }).waitFor();
    // The page reached takes the focus at its heading, as a new document would, by a link or by Back.
    expect(await focused()).toBe('H1 Contacts');
    await page.goBack();
    await page.getByRole('heading', { name: 'Segments', level: 1 }).waitFor();
    expect(await focused()).toBe('H1 Segments');
    await page.goto(`${server.url}/dashboard/segments`);
    await page.getByLabel('Name').focus();
    await page.keyboard.type('Keyboard people');
    await page.keyboard.press('Enter');
    await page.getByRole('link', { name: 'Keyboard people' }).waitFor();
    // Deleting a row from its own button: the focus goes to the page's heading, not to nowhere.
    page.on('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Delete Keyboard people' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('link', { name: 'Keyboard people' }).waitFor({ state: 'detached' });
    await expect.poll(focused).toBe('H1 Segments');
    await context.close();
  });

  it('suppressions: a refused address keeps its field and shows why; an added one clears it and is listed until removed', async () => {
    const page = await openSignedIn(browser, server.url, server.apiKey, '/suppressions');
    page.on('dialog', (dialog) => void dialog.accept());
    const field = page.getByLabel('Email address');
    await field.fill('someone@localhost'); // the browser's own check lets it through; the contract does not
    await page.getByRole('button', { name: 'Suppress address' }).click();
    await page.getByRole('alert').filter({ hasText: /email/i }).waitFor();
    expect(await field.inputValue()).toBe('someone@localhost');
    await field.fill('gone@example.com');
    await page.getByRole('button', { name: 'Suppress address' }).click();
    await page.getByRole('button', { name: 'Remove gone@example.com' }).waitFor();
    expect(await field.inputValue()).toBe('');
    expect(await page.getByRole('alert').count()).toBe(0);
    await page.getByRole('button', { name: 'Remove gone@example.com' }).click();
    await page.getByText('No suppressed addresses here.').waitFor();
    const listed = await server.request('/suppressions');
    expect(((await listed.json()) as { data: unknown[] }).data).toEqual([]);
    await page.context().close();
  });

  it('tells a sending key, and an unknown key, why they cannot sign in', async () => {
    const created = await server.request('/api-keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'sender', permission: 'sending_access' }) });
    const { token } = (await created.json()) as { token: string };
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${server.url}/dashboard`);
    await page.getByLabel('API key').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: /may only send emails.*full access key/ }).waitFor();
    await page.getByLabel('API key').fill('re_unknown000000000000000000000000');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'API key is invalid.' }).waitFor();
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([]);
    await context.close();
  });
});
