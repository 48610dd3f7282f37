// The dashboard's domains, in Chromium against a live server on SQLite whose DNS checks ask a resolver
// on a closed loopback port: a domain added through the page, its four records in a table, a value
// copied to the clipboard, a tracking setting kept over a reload, a check that ends without an answer,
// and deleting it. The records table at a desktop's and a phone's width, reaching past neither window.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { until } from '../support/receiver.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

/** Where the screenshots go, to be looked at: out of the repository. */
const SCREENSHOTS = process.env.SCREENSHOT_DIR ?? '/tmp';

describe.skipIf(!chromiumPresent)("the dashboard's domains", () => {
  let browser: Browser;
  let server: TestServer;
  const opened: Page[] = [];
  const open = async (path: string, width = 1280) => {
    const page = await openSignedIn(browser, server.url, server.apiKey, path);
    await page.setViewportSize({ width, height: 800 });
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    page.on('dialog', (dialog) => void dialog.accept());
    opened.push(page);
    return page;
  };
  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);
  /** The domain's status as its page announces it. */
  const shownStatus = (page: Page) => page.locator('.page-heading [role="status"]').textContent();

  beforeAll(async () => {
    // Nothing listens on the discard port: every look-up goes unanswered. A bounce domain and its MX
    // host add the return path's MX record to the three every domain has.
    const domains = { ...loadConfig({}).domains, dnsServers: ['127.0.0.1:9'], bounceDomain: 'bounces.mailroom.test', mxHost: 'mx.mailroom.test' };
    server = await startTestServer('sqlite', { config: { domains } });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    for (const page of opened) await page.context().close();
    await browser?.close();
    await server?.close();
  });

  it('adds a domain, shows and copies its records, keeps its tracking, verifies it, and deletes it', async () => {
    const page = await open('/contacts');
    await page.getByRole('link', { name: 'Domains', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();

    // The server's refusal is shown as it wrote it, and the name stays to be corrected.
    const name = page.getByLabel('Name', { exact: true });
    await name.fill('not a domain');
    await page.getByRole('button', { name: 'Add domain' }).click();
    await page.getByRole('alert').waitFor();
    await page.screenshot({ path: `${SCREENSHOTS}/dashboard-domains-refused-1280.png` });
    expect(await name.inputValue()).toBe('not a domain');

    await name.fill('acme-dashboard.test');
    await page.getByRole('button', { name: 'Add domain' }).click();
    const heading = page.getByRole('heading', { level: 1, name: 'Domain: acme-dashboard.test' });
    await heading.waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe('H1');
    const { data: listed } = await api('GET', '/domains');
    const id: string = listed.find((d: { name: string }) => d.name === 'acme-dashboard.test').id;
    const domain = await api('GET', `/domains/${id}`);
    expect(await shownStatus(page)).toBe('not_started');

    const table = page.getByRole('table', { name: 'DNS records' });
    expect(await table.getByRole('columnheader').allTextContents()).toEqual(['Record', 'Type', 'Name', 'Value', 'Priority', 'TTL', 'Status']);
    const rows = table.getByRole('row').filter({ has: page.getByRole('cell') });
    expect(await rows.count()).toBe(4);
    expect(await rows.locator('td:first-child').allTextContents()).toEqual(domain.records.map((r: { record: string }) => r.record));
    const dkim = domain.records.find((r: { record: string }) => r.record === 'DKIM');
    expect(await rows.first().locator('code').nth(1).textContent()).toBe(dkim.value);

    // Copied: on the clipboard, and said beside the button.
    const copy = page.getByRole('button', { name: 'Copy value of DKIM record' });
    await copy.click();
    await rows.first().getByText('Copied', { exact: true }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(dkim.value);
    // Each of the two SPF records' buttons says which it copies.
    expect(await page.getByRole('button', { name: /^Copy (name|value) of SPF (TXT|MX) record$/ }).count()).toBe(4);

    // The long DKIM value wraps within its cell: nothing reaches past the window, nor scrolls in the table.
    expect(await overflows(page)).toBe(false);
    expect(await table.evaluate((element) => element.scrollWidth <= element.clientWidth)).toBe(true);
    await page.screenshot({ path: `${SCREENSHOTS}/dashboard-domain-1280.png`, fullPage: true });

    // Click tracking, saved, is still on after a reload.
    const clicks = page.getByRole('checkbox', { name: 'Click tracking' });
    expect(await clicks.isChecked()).toBe(false);
    await clicks.check();
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByRole('status').filter({ hasText: 'Settings saved.' }).waitFor();
    await page.reload();
    await heading.waitFor();
    expect(await page.getByRole('checkbox', { name: 'Click tracking' }).isChecked()).toBe(true);
    expect(await page.getByRole('checkbox', { name: 'Open tracking' }).isChecked()).toBe(false);
    expect((await api('GET', `/domains/${id}`)).click_tracking).toBe(true);

    // A phone's width: the table scrolls within itself, the page does not.
    const narrow = await open(`/domains/${id}`, 360);
    await narrow.getByRole('heading', { level: 1, name: 'Domain: acme-dashboard.test' }).waitFor();
    await narrow.getByRole('button', { name: 'Copy value of DKIM record' }).waitFor();
    expect(await overflows(narrow)).toBe(false);
    await narrow.screenshot({ path: `${SCREENSHOTS}/dashboard-domain-360.png`, fullPage: true });
    // Scrolled within the table to the value, as a thumb would.
    await narrow.locator('td.record-value').first().evaluate((cell: HTMLElement) => void (cell.closest('table')!.scrollLeft = cell.offsetLeft));
    await narrow.screenshot({ path: `${SCREENSHOTS}/dashboard-domain-360-value.png` });
    expect(await overflows(narrow)).toBe(false);

    // Verify: the check starts, the page follows it, and with no resolver answering it ends unverified.
    await page.getByRole('button', { name: 'Verify' }).click();
    await until(async () => (await shownStatus(page)) !== 'not_started', 'the check started');
    await until(async () => ['failed', 'temporary_failure'].includes((await shownStatus(page))!), async () => `the check ended; the page shows ${await shownStatus(page)}`, 30_000);
    expect(['failed', 'temporary_failure']).toContain((await api('GET', `/domains/${id}`)).status);
    await page.screenshot({ path: `${SCREENSHOTS}/dashboard-domain-checked-1280.png` });

    // A new key: listed beside the one in use, each Copy button naming its record.
    await page.getByRole('button', { name: 'Rotate DKIM key' }).click();
    await until(async () => (await rows.locator('td:first-child').allTextContents()).filter((kind) => kind === 'DKIM').length === 2, 'the new key listed');
    const rotated = (await api('GET', `/domains/${id}`)).records.filter((r: { record: string }) => r.record === 'DKIM');
    expect(rotated).toHaveLength(2);
    await page.getByRole('button', { name: `Copy value of DKIM record ${rotated[1].name}` }).waitFor();

    await page.getByRole('button', { name: 'Delete domain' }).click();
    await page.getByRole('heading', { level: 1, name: 'Domains' }).waitFor();
    await page.getByText('No domains yet.').waitFor();
    expect((await api('GET', `/domains/${id}`)).name).toBe('not_found');
  });

  it('lists domains with their status, and leads back to the list from one that does not exist', async () => {
    const made = await api('POST', '/domains', { name: 'listed.test' });
    const page = await open('/domains');
    const row = page.getByRole('row').filter({ hasText: 'listed.test' });
    await row.getByText('not_started', { exact: true }).waitFor();
    await row.getByRole('link', { name: 'listed.test' }).click();
    await page.getByRole('heading', { level: 1, name: 'Domain: listed.test' }).waitFor();
    await api('DELETE', `/domains/${made.id}`);

    const unknown = await open('/domains/00000000-0000-4000-8000-000000000000');
    await unknown.getByRole('alert').waitFor();
    expect(await unknown.getByRole('link', { name: 'All domains' }).count()).toBe(1);
  });
});

/** Whether anything on the page reaches past the right edge of its window. */
const overflows = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
