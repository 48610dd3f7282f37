// The unsubscribe page in Debian's Chromium, as a reader who followed a broadcast email's link uses
// it: the topics shown with their choices, a choice changed and saved by clicking, the one-click
// button, at a phone's width too, under the page's own Content-Security-Policy (no script, no error).
import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPresent, launchChromium } from '../support/dashboard.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.skipIf(!chromiumPresent)('the unsubscribe page in Chromium', () => {
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

  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);
  /** A new page at `width`, collecting what the browser complains of: errors, CSP violations included. */
  async function open(url: string, width = 1280): Promise<{ page: Page; complaints: string[] }> {
    const context = await browser.newContext({ viewport: { width, height: 800 } });
    const page = await context.newPage();
    const complaints: string[] = [];
    page.on('pageerror', (error) => complaints.push(error.message));
    page.on('console', (message) => void (message.type() === 'error' && complaints.push(message.text())));
    await page.goto(url);
    return { page, complaints };
  }
  const choice = async (contactId: string, topicId: string) => {
    const topics: { id: string; subscription: string }[] = (await api('GET', `/contacts/${contactId}/topics`)).data;
    return topics.find((t) => t.id === topicId)?.subscription;
  };

  it('shows the topics with their choices, and saves a changed choice when the reader clicks', async () => {
    const weekly = (await api('POST', '/topics', { name: 'Weekly news', default_subscription: 'opt_in', visibility: 'public', description: 'What shipped this week.' })).id;
    const offers = (await api('POST', '/topics', { name: 'Offers', default_subscription: 'opt_out', visibility: 'public' })).id;
    const hidden = (await api('POST', '/topics', { name: 'Beta programme', default_subscription: 'opt_out', visibility: 'private' })).id;
    const reader = (await api('POST', '/contacts', { email: `reader-${randomUUID()}@example.com` })).id;
    const url = `${server.url}/unsubscribe/${server.links.tokens.sign({ contactId: reader, scope: 'topic', id: weekly })}`;

    const { page, complaints } = await open(url);
    expect(await page.getByRole('group', { name: 'Weekly news' }).isVisible()).toBe(true);
    expect(await page.getByRole('group', { name: 'Offers' }).isVisible()).toBe(true);
    expect(await page.getByRole('group', { name: 'Beta programme' }).count()).toBe(0); // private, not opted in
    const weeklyGroup = page.getByRole('group', { name: 'Weekly news' });
    expect(await weeklyGroup.getByLabel('Send me these').isChecked()).toBe(true);
    expect(await page.getByRole('group', { name: 'Offers' }).getByLabel('Stop these').isChecked()).toBe(true);

    await weeklyGroup.getByLabel('Stop these').check();
    await page.getByRole('group', { name: 'Offers' }).getByLabel('Send me these').check();
    await page.getByRole('button', { name: 'Save my choices' }).click();
    await page.getByRole('heading', { name: 'Your choices are saved' }).waitFor();
    expect(await choice(reader, weekly)).toBe('opt_out');
    expect(await choice(reader, offers)).toBe('opt_in');
    expect(await choice(reader, hidden)).toBe('opt_out');
    expect(complaints).toEqual([]);
    await page.context().close();
  });

  it("leaves the link's topic with its one button, and fits a phone's width", async () => {
    const digest = (await api('POST', '/topics', { name: 'Daily digest', default_subscription: 'opt_in', visibility: 'public' })).id;
    // Another public topic whose name and description have no space to wrap at, as long as the API allows.
    await api('POST', '/topics', { name: 'W'.repeat(50), description: 'x'.repeat(200), default_subscription: 'opt_in', visibility: 'public' });
    const reader = (await api('POST', '/contacts', { email: `phone-${randomUUID()}@example.com` })).id;
    const url = `${server.url}/unsubscribe/${server.links.tokens.sign({ contactId: reader, scope: 'topic', id: digest })}`;
    const { page, complaints } = await open(url, 375);
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    expect(await choice(reader, digest)).toBe('opt_in'); // opening the page changed nothing
    await page.getByRole('button', { name: /^Unsubscribe$/ }).first().click();
    await page.getByRole('heading', { name: 'You are unsubscribed' }).waitFor();
    expect(await choice(reader, digest)).toBe('opt_out');
    expect((await api('GET', `/contacts/${reader}`)).unsubscribed).toBe(false);
    expect(complaints).toEqual([]);
    await page.context().close();
  });

  it('shows the choices as they now are on Back after unsubscribing, so that saving again does not undo it', async () => {
    const news = (await api('POST', '/topics', { name: 'News', default_subscription: 'opt_in', visibility: 'public' })).id;
    const reader = (await api('POST', '/contacts', { email: `back-${randomUUID()}@example.com` })).id;
    const url = `${server.url}/unsubscribe/${server.links.tokens.sign({ contactId: reader, scope: 'topic', id: news })}`;
    const { page, complaints } = await open(url);
    await page.getByRole('button', { name: /^Unsubscribe$/ }).click();
    await page.getByRole('heading', { name: 'You are unsubscribed' }).waitFor();
    expect(await choice(reader, news)).toBe('opt_out');
    await page.goBack();
    const group = page.getByRole('group', { name: 'News', exact: true });
    await group.waitFor();
    // Before, the browser put back the form as it was left: "Send me these", which Save then recorded.
    expect(await group.getByLabel('Stop these').isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Save my choices' }).click();
    await page.getByRole('heading', { name: 'Your choices are saved' }).waitFor();
    expect(await choice(reader, news)).toBe('opt_out');
    // The buttons show where the keyboard is: an outline other than the button's own colour.
    await page.keyboard.press('Tab');
    const outline = await page.evaluate(() => {
      const style = getComputedStyle(document.activeElement!);
      return { tag: document.activeElement!.tagName, outline: `${style.outlineStyle} ${style.outlineColor}` };
    });
    expect(outline.tag).toBe('A');
    expect(outline.outline).toBe('solid rgb(37, 99, 235)');
    expect(complaints).toEqual([]);
    await page.context().close();
  });

  it('says in a page, not in JSON, that a link cut short or for a contact deleted since does not work', async () => {
    const reader = (await api('POST', '/contacts', { email: `cut-${randomUUID()}@example.com` })).id;
    const url = `${server.url}/unsubscribe/${server.links.tokens.sign({ contactId: reader, scope: 'broadcast', id: randomUUID() })}`;
    for (const broken of [url.slice(0, -5), url]) {
      if (broken === url) await api('DELETE', `/contacts/${reader}`);
      const { page, complaints } = await open(broken, 375);
      await page.getByRole('heading', { level: 1, name: 'This unsubscribe link does not work' }).waitFor();
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
      expect(complaints.filter((complaint) => !complaint.includes('404'))).toEqual([]);
      await page.context().close();
    }
    // Code asking for JSON, or for anything, still gets the API's error.
    for (const accept of ['application/json', '*/*']) {
      const res = await fetch(url, { headers: { accept } });
      expect(res.status).toBe(404);
      expect(res.headers.get('vary')).toMatch(/Accept/);
      expect(await res.json()).toMatchObject({ name: 'not_found', message: 'Unsubscribe link not found' });
    }
  });
});
