// The dashboard when things go wrong around a person using it: the bare /dashboard address, a network
// that drops a change, a double click, a time already past, a key revoked elsewhere mid-session, a link
// to something that does not exist or is not even well-formed, long unbroken text, and a phone's width.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.skipIf(!chromiumPresent)('the dashboard when things go wrong', () => {
  let browser: Browser;
  let server: TestServer;
  const opened: Page[] = [];
  const open = async (path = '/contacts', key = server.apiKey) => {
    const page = await openSignedIn(browser, server.url, key, path);
    page.on('dialog', (dialog) => void dialog.accept());
    opened.push(page);
    return page;
  };
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await server.request(path, { method, ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) });
    return res.json();
  };
  /** Whether anything on the page reaches past the right edge of its window. */
  const overflows = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);

  beforeAll(async () => {
    server = await startTestServer('sqlite');
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    for (const page of opened) await page.context().close();
    await browser?.close();
    await server?.close();
  });

  it('opens the contacts page at /dashboard and /dashboard/, with its address, rather than "Page not found"', async () => {
    const page = await open('/contacts');
    for (const root of ['/dashboard', '/dashboard/']) {
      await page.goto(server.url + root);
      await page.getByRole('heading', { level: 1, name: 'Contacts' }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/dashboard/contacts');
      expect(await page.getByRole('link', { name: 'Contacts' }).getAttribute('aria-current')).toBe('page');
    }
  });

  it('says so when a change cannot reach the server, and keeps what was typed', async () => {
    const page = await open('/segments');
    await page.route('**/segments', (route) => (route.request().method() === 'POST' ? route.abort('connectionreset') : route.continue()));
    await page.getByLabel('Name').fill('Never made');
    await page.getByRole('button', { name: 'Create segment' }).click();
    await page.getByRole('alert').filter({ hasText: 'The server could not be reached' }).waitFor();
    expect(await page.getByLabel('Name').inputValue()).toBe('Never made');
    await page.unroute('**/segments');
  });

  it('makes one segment of a double click on Create, however slow the server', async () => {
    const page = await open('/segments');
    let posts = 0;
    await page.route('**/segments', async (route) => {
      if (route.request().method() === 'POST') {
        posts++;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      await route.continue();
    });
    await page.getByLabel('Name').fill('Clicked twice');
    await page.getByRole('button', { name: 'Create segment' }).dblclick();
    await page.getByRole('link', { name: 'Clicked twice' }).waitFor();
    expect(posts).toBe(1);
    const segments = (await api('GET', '/segments')).data as { name: string }[];
    expect(segments.filter((segment) => segment.name === 'Clicked twice')).toHaveLength(1);
    await page.unroute('**/segments');
  });

  it('refuses to schedule a broadcast for a time already past, which the API would send at once', async () => {
    const segment = await api('POST', '/segments', { name: 'Schedule slip' });
    const { id } = await api('POST', '/broadcasts', { segment_id: segment.id, from: 'news@acme.dev', subject: 'Hi', text: 'Hi' });
    const page = await open(`/broadcasts/${id}`);
    await page.getByLabel('Send at').fill('2001-01-01T10:00');
    await page.getByRole('button', { name: 'Schedule' }).click();
    await page.getByRole('alert').filter({ hasText: 'That time has passed' }).waitFor();
    expect((await api('GET', `/broadcasts/${id}`)).status).toBe('draft');
  });

  it('signs out, saying why, when its key is revoked elsewhere mid-session', async () => {
    const { id, key } = await createKey(server.store, 'revoked mid-session', 'full_access');
    const page = await open('/contacts', key);
    await api('DELETE', `/api-keys/${id}`);
    // The server trusts a key it read for a short while; the dashboard notices at the first refusal.
    await expect
      .poll(async () => {
        await page.getByRole('link', { name: 'Segments' }).click().catch(() => {});
        return page.getByLabel('API key').isVisible();
      }, { timeout: 15_000, interval: 500 })
      .toBe(true);
    expect(await page.getByRole('alert').textContent()).toContain('no longer valid');
    expect(await page.evaluate(() => Object.values(sessionStorage))).toEqual([]);
  });

  it('shows a heading and the way back for a broadcast or template that does not exist, and the app for a malformed address', async () => {
    const page = await open('/contacts');
    for (const [path, title, back] of [
      ['/broadcasts/0d3c0a5e-1b7a-4c11-9e55-8c3f1f3f0e2a', 'Broadcast', 'All broadcasts'],
      ['/templates/no-such-template', 'Template', 'All templates'],
    ] as const) {
      await page.goto(`${server.url}/dashboard${path}`);
      await page.getByRole('heading', { level: 1, name: title }).waitFor();
      await page.getByRole('link', { name: back }).waitFor();
      expect(await page.getByRole('alert').textContent()).toMatch(/not found/i);
      expect(await page.title()).toBe(`${title} · Mailroom`);
    }
    const response = await page.goto(`${server.url}/dashboard/contacts/%E0%A4%A`);
    expect(response!.headers()['content-type']).toMatch(/^text\/html/);
    await page.getByRole('heading', { level: 1, name: 'Page not found' }).waitFor();
  });

  it('wraps long unbroken text instead of pushing the buttons off the page', async () => {
    await api('POST', '/webhooks', { endpoint: `https://hooks.example.com/${'x'.repeat(300)}`, events: ['email.sent'] });
    await api('POST', '/segments', { name: 'n'.repeat(200) });
    const page = await open('/webhooks');
    await page.getByRole('button', { name: 'Delete' }).first().waitFor();
    expect(await overflows(page)).toBe(false);
    await page.goto(`${server.url}/dashboard/segments`);
    await page.getByRole('button', { name: 'Delete' }).first().waitFor();
    expect(await overflows(page)).toBe(false);
  });

  it('fits a phone: at 375 px the sections sit above the page and nothing reaches past the edge', async () => {
    const page = await open('/contacts');
    await page.setViewportSize({ width: 375, height: 800 });
    for (const path of ['/contacts', '/broadcasts/new', '/emails', '/segments']) {
      await page.goto(`${server.url}/dashboard${path}`);
      await page.getByRole('heading', { level: 1 }).waitFor();
      expect(await overflows(page), path).toBe(false);
      const nav = await page.getByRole('navigation', { name: 'Sections' }).boundingBox();
      const main = await page.locator('main').boundingBox();
      expect(main!.y, path).toBeGreaterThan(nav!.y + nav!.height - 1);
      expect(main!.width, path).toBeGreaterThan(340);
    }
  });
});
