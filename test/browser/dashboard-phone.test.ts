// The dashboard on a phone, 390 px wide, in Chromium against a live server on SQLite: the sections
// folded into a bar whose menu opens every one of them; the list pages scrolling sideways neither
// whole nor in their lists; an address in a list kept whole on its line; and a page's list above its
// form for a new one.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const PHONE = { width: 390, height: 844 };
const SECTIONS = ['Contacts', 'Segments', 'Topics', 'Broadcasts', 'Emails', 'Templates', 'Domains', 'Webhooks', 'Suppressions', 'API keys'];
const LISTS = ['/contacts', '/segments', '/topics', '/broadcasts', '/emails', '/templates', '/domains', '/webhooks', '/suppressions', '/api-keys'];
/** Addresses with hyphens and dots, each a line's width at most: a table cell could keep each whole. */
const MEMBER = 'mary-ann.o-neill@example.com';
const OTHER = 'jean-luc.picard@example.com';
const SUPPRESSED = 'bounced-once.reader@example.com';

describe.skipIf(!chromiumPresent)('the dashboard on a phone', () => {
  let browser: Browser;
  let server: TestServer;
  let segmentId = '';
  const opened: Page[] = [];
  const open = async (path: string) => {
    const page = await openSignedIn(browser, server.url, server.apiKey, path);
    await page.setViewportSize(PHONE);
    opened.push(page);
    return page;
  };
  const go = async (page: Page, path: string) => {
    await page.goto(`${server.url}/dashboard${path}`);
    await page.getByRole('heading', { level: 1 }).waitFor();
    // Read: its rows, or what it says in their place, shown.
    await page.locator('main td, main p:not([role])').first().waitFor();
  };
  /** The lines `text`, found within `within`, is set on: the distinct tops of its rendered boxes. */
  const linesOf = (page: Page, text: string, within = 'main') =>
    page.evaluate(
      ([text, within]) => {
        const walker = document.createTreeWalker(document.querySelector(within)!, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const at = node.textContent!.indexOf(text);
          if (at < 0) continue;
          const range = document.createRange();
          range.setStart(node, at);
          range.setEnd(node, at + text.length);
          return new Set([...range.getClientRects()].filter((box) => box.width > 0).map((box) => Math.round(box.top))).size;
        }
        throw new Error(`${text} is not on the page`);
      },
      [text, within],
    );

  beforeAll(async () => {
    server = await startTestServer('sqlite');
    browser = await launchChromium();
    const api = (path: string, body: unknown) => server.api('POST', path, body);
    const member = await api('/contacts', { email: MEMBER, first_name: 'Mary-Ann', last_name: "O'Neill" });
    await api('/contacts', { email: OTHER, first_name: 'Jean-Luc', last_name: 'Picard' });
    segmentId = (await api('/segments', { name: 'Readers' })).id;
    await api(`/contacts/${member.id}/segments/${segmentId}`, {});
    await api('/topics', { name: 'Product news', description: 'What shipped this month', default_subscription: 'opt_in' });
    await api('/broadcasts', { segment_id: segmentId, name: 'November news', from: 'news@acme.dev', subject: 'Hi', text: 'Hi' });
    await api('/emails', { from: 'team@acme.dev', to: [MEMBER, OTHER], subject: 'Your invoice for November', text: 'x' });
    await api('/templates', { name: 'Welcome email', alias: 'welcome', html: '<p>Hi</p>' });
    await api('/domains', { name: 'acme-phone.test' });
    await api('/webhooks', { endpoint: 'https://hooks.example.com/mailroom/deliveries', events: ['email.sent', 'email.delivered', 'email.bounced'] });
    await api('/suppressions', { email: SUPPRESSED });
    await api('/api-keys', { name: 'Production web app', permission: 'sending_access' });
  }, 120_000);
  afterAll(async () => {
    for (const page of opened) await page.context().close();
    await browser?.close();
    await server?.close();
  });

  it('folds the sections into a bar at most 60 px tall, whose menu opens every section and closes again', async () => {
    const page = await open('/contacts');
    const nav = page.getByRole('navigation', { name: 'Sections' });
    const height = async () => (await nav.boundingBox())!.height;
    for (const section of SECTIONS) {
      expect(await height(), `closed, on the way to ${section}`).toBeLessThanOrEqual(60);
      expect((await page.locator('main').boundingBox())!.width).toBeGreaterThan(360);
      await nav.getByRole('button', { name: 'Menu' }).click();
      await nav.getByRole('link', { name: section, exact: true }).click();
      await page.getByRole('heading', { level: 1, name: section }).waitFor();
      expect(await nav.getByRole('button', { name: 'Menu' }).getAttribute('aria-expanded')).toBe('false');
    }
    expect(await height()).toBeLessThanOrEqual(60);
    // Escape closes it too, the focus back on its button; signing out is in it.
    const menu = nav.getByRole('button', { name: 'Menu' });
    await menu.click();
    await nav.getByRole('button', { name: 'Sign out' }).waitFor();
    await page.keyboard.press('Escape');
    expect(await menu.getAttribute('aria-expanded')).toBe('false');
    expect(await menu.evaluate((button) => button === document.activeElement)).toBe(true);
    expect(await height()).toBeLessThanOrEqual(60);
  });

  it('scrolls no list page sideways, nor the list within it', async () => {
    const page = await open('/contacts');
    for (const path of [...LISTS, `/segments/${segmentId}`]) {
      await go(page, path);
      const sideways = await page.evaluate(() => ({
        page: document.documentElement.scrollWidth - innerWidth,
        // Whatever on it scrolls by itself, a list's table most of all, has nothing past its edge.
        lists: [...document.querySelectorAll('main *')].filter((element) => /auto|scroll/.test(getComputedStyle(element).overflowX) && element.scrollWidth > element.clientWidth + 1).length,
      }));
      expect(sideways, path).toEqual({ page: 0, lists: 0 });
    }
  });

  it('keeps each address in a list whole on one line', async () => {
    const page = await open('/contacts');
    for (const [path, addresses] of [
      ['/contacts', [MEMBER, OTHER]],
      [`/segments/${segmentId}`, [MEMBER]],
      ['/emails', [MEMBER, OTHER]],
      ['/suppressions', [SUPPRESSED]],
    ] as const) {
      await go(page, path);
      for (const address of addresses) expect(await linesOf(page, address, 'main table'), `${address} on ${path}`).toBe(1);
    }
  });

  it('puts the list above the form for a new one on every page that has both', async () => {
    const page = await open('/contacts');
    for (const [path, form] of [
      ['/contacts', 'New contact'],
      ['/segments', 'New segment'],
      ['/topics', 'New topic'],
      ['/domains', 'New domain'],
      ['/webhooks', 'New webhook'],
      ['/suppressions', 'Suppress an address'],
      ['/api-keys', 'New API key'],
    ] as const) {
      await go(page, path);
      const list = (await page.getByRole('table').boundingBox())!;
      const creating = (await page.getByRole('form', { name: form }).boundingBox())!;
      expect(list.y + list.height, path).toBeLessThanOrEqual(creating.y);
    }
  });
});
