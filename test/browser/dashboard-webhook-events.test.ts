// The dashboard's page of a webhook's events, in Chromium against a live server on SQLite whose outbox
// worker posts to a receiver on 127.0.0.1: each delivery's status, one event's last answer and payload,
// a replay that the receiver gets with the same svix-id, and no replay for a disabled webhook.
import type { Browser, Page } from 'playwright-core';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { WebhookDispatcher } from '../../server/webhooks/dispatch.ts';
import { chromiumPresent, launchChromium, openSignedIn } from '../support/dashboard.ts';
import { emailEvent, emailRecord, recordEvents, startReceiver, until, type Receiver } from '../support/receiver.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.skipIf(!chromiumPresent)("the dashboard's webhook events", () => {
  let browser: Browser;
  let server: TestServer;
  let inbox: Receiver;
  let dispatcher: WebhookDispatcher;
  const opened: Page[] = [];
  const open = async (path: string, width = 1280) => {
    const page = await openSignedIn(browser, server.url, server.apiKey, path);
    await page.setViewportSize({ width, height: 800 });
    page.on('dialog', (dialog) => void dialog.accept());
    opened.push(page);
    return page;
  };
  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);

  beforeAll(async () => {
    server = await startTestServer('sqlite', { config: { webhooks: { ...loadConfig({}).webhooks, allowPrivate: true } } });
    inbox = await startReceiver((received) => (received.body.includes('"Refused"') ? 500 : 200));
    dispatcher = new WebhookDispatcher(server.store, pino({ level: 'silent' }), { ...server.config.webhooks, retryScheduleMs: [60_000], idleMs: 20 });
    dispatcher.start();
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    for (const page of opened) await page.context().close();
    await browser?.close();
    await dispatcher?.stop();
    await inbox?.close();
    await server?.close();
  });

  it('lists each event with its status, shows one with its last answer and payload, and replays it', async () => {
    const { id } = await api('POST', '/webhooks', { endpoint: inbox.url, events: ['email.sent'] });
    const taken = emailRecord({ subject: 'Taken' });
    const refused = emailRecord({ subject: 'Refused' });
    await recordEvents(server.store, [emailEvent('email.sent', taken), emailEvent('email.sent', refused)], [taken, refused]);
    await until(() => inbox.ids().size >= 2, 'both events posted');
    await until(async () => (await api('GET', `/webhooks/${id}/events`)).data.every((e: { status: string }) => e.status !== 'pending'), 'both recorded');
    const events = (await api('GET', `/webhooks/${id}/events`)).data as { id: string; status: string }[];
    const failing = events.find((e) => e.status === 'attempting')!;
    const succeeded = events.find((e) => e.status === 'success')!;

    const page = await open('/webhooks');
    await page.getByRole('link', { name: `Events of ${inbox.url}` }).click();
    await page.getByRole('heading', { level: 1, name: `Events of ${inbox.url}` }).waitFor();
    const row = (eventId: string) => page.getByRole('row').filter({ hasText: eventId });
    expect(await row(failing.id).getByText('attempting', { exact: true }).count()).toBe(1);
    expect(await row(succeeded.id).getByText('success', { exact: true }).count()).toBe(1);

    // A short window, so that the event, shown below the list, opens past its bottom unless taken to.
    await page.setViewportSize({ width: 1280, height: 320 });
    await row(failing.id).getByRole('button', { name: `Show ${failing.id}` }).click();
    const detail = page.getByRole('region', { name: `Event ${failing.id}` });
    await detail.waitFor();
    await until(() => detail.evaluate((element) => element.getBoundingClientRect().top < innerHeight && element === document.activeElement), 'the event in view, with focus');
    await page.setViewportSize({ width: 1280, height: 800 });
    expect(await detail.textContent()).toContain('1 attempt; the last answered 500');
    expect(await detail.locator('pre').textContent()).toContain(refused.id);

    const before = inbox.received.length;
    await row(succeeded.id).getByRole('button', { name: `Replay ${succeeded.id}` }).click();
    await until(() => inbox.received.length > before, async () => `the replay posted: ${JSON.stringify(await api('GET', `/webhooks/${id}/events/${succeeded.id}`))} page: ${await page.locator('main').textContent()}`);
    expect(inbox.received.at(-1)!.id).toBe(succeeded.id);
    await page.getByRole('status').filter({ hasText: `Event ${succeeded.id} is posted again now.` }).waitFor();
    expect(await overflows(page)).toBe(false);

    const narrow = await open(`/webhooks/${id}/events`, 375);
    await narrow.getByRole('heading', { level: 1, name: `Events of ${inbox.url}` }).waitFor();
    await narrow.getByRole('row').filter({ hasText: succeeded.id }).waitFor();
    expect(await overflows(narrow)).toBe(false);
  });

  it('offers no replay for a disabled webhook, and says why; an unknown webhook leads back to the list', async () => {
    const { id } = await api('POST', '/webhooks', { endpoint: inbox.url, events: ['email.sent'] });
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
    await until(async () => (await api('GET', `/webhooks/${id}/events`)).data.some((e: { status: string }) => e.status === 'success'), 'the event delivered');
    await api('PATCH', `/webhooks/${id}`, { status: 'disabled' });
    const page = await open(`/webhooks/${id}/events`);
    await page.getByText('This webhook is disabled').waitFor();
    await page.getByRole('row').nth(1).waitFor();
    expect(await page.getByRole('button', { name: /^Replay/ }).count()).toBe(0);

    const unknown = await open('/webhooks/00000000-0000-4000-8000-000000000000/events');
    await unknown.getByRole('alert').filter({ hasText: 'Webhook not found' }).waitFor();
    expect(await unknown.getByRole('link', { name: 'All webhooks' }).count()).toBe(1);
  });
});

/** Whether anything on the page reaches past the right edge of its window. */
const overflows = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
