// The reference page at /docs in Debian's Chromium: its groups of operations and webhooks listed,
// and nothing in the console but the one image its policy blocks
// (Redocly's logo, the only thing the page would fetch from elsewhere).
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPresent, launchChromium } from '../support/dashboard.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { WAIT_MS } from '../support/until.ts';

describe.skipIf(!chromiumPresent)('the reference page in a browser', () => {
  let server: TestServer;
  let browser: Browser;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('lists every group of operations and webhooks, and logs no error but the blocked logo', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    const outside: string[] = [];
    page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('request', (request) => void (!request.url().startsWith(server.url) && !/^(data|blob):/.test(request.url()) && outside.push(request.url())));
    const failed: string[] = [];
    page.on('response', (response) => void (response.status() >= 400 && failed.push(`${response.status()} ${response.url()}`)));
    await page.goto(`${server.url}/docs`);
    await page.getByRole('link', { name: 'Webhooks' }).first().waitFor({ timeout: WAIT_MS });
    for (const group of ['Emails', 'Contacts', 'Broadcasts', 'Templates']) expect(await page.getByRole('link', { name: group }).count(), group).toBeGreaterThan(0);
    // Every request the page makes has been answered: a late failure or error would be in by now.
    await page.waitForLoadState('networkidle', { timeout: WAIT_MS });
    expect(failed).toEqual([]);
    expect(errors.filter((text) => !/logo|cdn\.redoc/i.test(text))).toEqual([]);
    expect(outside.filter((url) => !/cdn\.redoc/.test(url))).toEqual([]);
    await page.close();
  });
});
