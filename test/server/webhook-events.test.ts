// A webhook's events over HTTP, on SQLite and PostgreSQL (GET /webhooks/{id}/events, GET and replay
// of one), against a real receiver on 127.0.0.1 and the outbox worker posting to it: what the list and
// the event say at each stage of a delivery, that the payload shown is the body posted, and what a
// replay posts. The server checks each of its responses against the contract.
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_WEBHOOKS, WebhookDispatcher, type WebhookOptions } from '../../server/webhooks/dispatch.ts';
import { backends } from '../support/backends.ts';
import { emailEvent, emailRecord, recordEvents, startReceiver, until, type Receiver } from '../support/receiver.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

/** Three attempts: the second 50 ms after the first, the third a minute later (a test sees it waiting). */
const OPTIONS: WebhookOptions = { ...DEFAULT_WEBHOOKS, allowPrivate: true, retryScheduleMs: [50, 60_000], timeoutMs: 2_000, leaseMs: 5_000, idleMs: 20 };
const UNKNOWN_EVENT = 'msg_000000000000AAAAAAAAAAAA';

describe.each(backends)('webhook events on %s', (backend) => {
  let server: TestServer;
  let dispatcher: WebhookDispatcher | undefined;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { webhooks: OPTIONS } });
  });
  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    await server.store.database.db.deleteFrom('webhook_deliveries').execute();
    await server.store.database.db.deleteFrom('webhooks').execute();
  });
  afterAll(async () => server?.close());

  const get = async (path: string) => {
    const res = await server.request(path);
    return { status: res.status, body: await res.json() };
  };
  const replay = async (webhookId: string, eventId: string) => {
    const res = await server.request(`/webhooks/${webhookId}/events/${eventId}/replay`, { method: 'POST' });
    return { status: res.status, body: await res.json() };
  };
  function dispatch() {
    dispatcher = new WebhookDispatcher(server.store, pino({ level: 'silent' }), OPTIONS);
    dispatcher.start();
  }
  async function receiver(answer?: Parameters<typeof startReceiver>[0]) {
    const started = await startReceiver(answer);
    receivers.push(started);
    return started;
  }
  async function webhook(endpoint: string, events: string[]): Promise<string> {
    const res = await server.request('/webhooks', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ endpoint, events }) });
    expect(res.status).toBe(201);
    return (await res.json()).id;
  }
  /**
   * Waits until the delivery's `attempts`-th refusal is recorded. A claim counts its attempt at once and
   * holds the delivery for the lease, so a count alone could be read while the post is still out.
   */
  async function refusalRecorded(webhookId: string, eventId: string, attempts: number) {
    await until(async () => {
      const { body } = await get(`/webhooks/${webhookId}/events/${eventId}`);
      return body.attempts === attempts && Date.parse(body.next_attempt_at) > Date.now() + OPTIONS.leaseMs;
    }, `refusal ${attempts} recorded`);
  }
  /** Records `count` emails sent, a second apart in their events' times, oldest first. */
  async function sentEmails(count: number) {
    const emails = Array.from({ length: count }, (_, n) => emailRecord({ subject: `Issue ${n}` }));
    const start = Date.now() - count * 1000;
    await recordEvents(server.store, emails.map((email, n) => ({ ...emailEvent('email.sent', email), created_at: new Date(start + n * 1000).toISOString() })), emails);
    return emails;
  }

  it('lists a webhook\'s events newest first, a page at a time both ways, pending until posted and success after', async () => {
    const inbox = await receiver();
    const id = await webhook(inbox.url, ['email.sent']);
    const other = await webhook(inbox.url, ['email.sent']);
    const emails = await sentEmails(5);

    const all = await get(`/webhooks/${id}/events`);
    expect(all.status).toBe(200);
    expect(all.body.has_more).toBe(false);
    expect(all.body.data).toHaveLength(5);
    expect(all.body.data.every((e: any) => e.type === 'email.sent' && e.status === 'pending')).toBe(true);
    const times = all.body.data.map((e: any) => e.created_at);
    expect(times).toEqual([...times].sort().reverse());
    const ids: string[] = all.body.data.map((e: any) => e.id);

    const first = await get(`/webhooks/${id}/events?limit=2`);
    expect(first.body).toMatchObject({ has_more: true, data: [{ id: ids[0] }, { id: ids[1] }] });
    const second = await get(`/webhooks/${id}/events?limit=2&after=${ids[1]}`);
    expect(second.body).toMatchObject({ has_more: true, data: [{ id: ids[2] }, { id: ids[3] }] });
    const back = await get(`/webhooks/${id}/events?limit=2&before=${ids[2]}`);
    expect(back.body).toMatchObject({ has_more: false, data: [{ id: ids[0] }, { id: ids[1] }] });

    // The other webhook's events are its own, and are no cursor of this list.
    const others = await get(`/webhooks/${other}/events`);
    expect(others.body.data).toHaveLength(5);
    expect(others.body.data.some((e: any) => ids.includes(e.id))).toBe(false);
    const foreign = await get(`/webhooks/${id}/events?after=${others.body.data[0].id}`);
    expect(foreign.status).toBe(422);
    expect(foreign.body.message).toBe('The `after` event of this webhook does not exist.');

    dispatch();
    await until(() => inbox.ids().size >= 10, () => `${inbox.ids().size} of 10 received`);
    await until(async () => (await get(`/webhooks/${id}/events`)).body.data.every((e: any) => e.status === 'success'), 'every event listed success');
    expect(emails).toHaveLength(5);
  });

  it('shows an event as it stands: the body posted, the last answer while a retry waits, and success once taken', async () => {
    let refusing = true;
    const inbox = await receiver(() => (refusing ? 503 : 200));
    const id = await webhook(inbox.url, ['email.sent']);
    const [email] = await sentEmails(1);
    const [listed] = (await get(`/webhooks/${id}/events`)).body.data;

    const pending = await get(`/webhooks/${id}/events/${listed.id}`);
    expect(pending.status).toBe(200);
    expect(pending.body).toMatchObject({ object: 'webhook_event', id: listed.id, type: 'email.sent', status: 'pending', attempts: 0, last_status_code: null, last_error: null });
    expect(Date.parse(pending.body.next_attempt_at)).toBeLessThanOrEqual(Date.now());

    dispatch();
    // Two attempts refused; the third is a minute away.
    await until(() => inbox.received.length >= 2, () => `${inbox.received.length} of 2 attempts`);
    await refusalRecorded(id, listed.id, 2);
    const waiting = await get(`/webhooks/${id}/events/${listed.id}`);
    expect(waiting.body).toMatchObject({ status: 'attempting', attempts: 2, last_status_code: 503 });
    expect(waiting.body.last_error).toMatch(/^HTTP 503/);
    expect(Date.parse(waiting.body.next_attempt_at)).toBeGreaterThan(Date.now() + 50_000);
    expect(waiting.body.payload).toEqual(JSON.parse(inbox.received[0]!.body));
    expect(waiting.body.payload.data).toMatchObject({ email_id: email!.id, subject: 'Issue 0' });

    refusing = false;
    const replayed = await replay(id, listed.id);
    expect(replayed).toEqual({ status: 200, body: { object: 'webhook_event', id: listed.id } });
    await until(async () => (await get(`/webhooks/${id}/events/${listed.id}`)).body.status === 'success', 'success after the replay');
    const taken = await get(`/webhooks/${id}/events/${listed.id}`);
    expect(taken.body).toMatchObject({ status: 'success', attempts: 3, last_status_code: 200, last_error: null, next_attempt_at: null });
    expect(inbox.received.map((r) => r.id)).toEqual([listed.id, listed.id, listed.id]);
  });

  it('replays an event that was taken, and starts one that failed for good over, with its retries', async () => {
    let answer = 200;
    const inbox = await receiver(() => answer);
    const id = await webhook(inbox.url, ['email.sent']);
    await sentEmails(2);
    const [taken, failing] = (await get(`/webhooks/${id}/events`)).body.data.map((e: any) => e.id as string);
    const db = server.store.database.db;
    // The second has used up its attempts already.
    await db.updateTable('webhook_deliveries').set({ state: 'failed', attempts: 3, last_status: 500, last_error: 'HTTP 500' }).where('id', '=', failing!).execute();
    dispatch();
    await until(() => inbox.received.length >= 1, 'the first event posted');
    await until(async () => (await get(`/webhooks/${id}/events/${taken}`)).body.status === 'success', 'the first recorded');
    expect((await get(`/webhooks/${id}/events/${failing}`)).body).toMatchObject({ status: 'failed', attempts: 3, next_attempt_at: null });

    expect((await replay(id, taken!)).status).toBe(200);
    await until(() => inbox.received.length >= 2, 'the replay of the first');
    expect(inbox.received[1]!.id).toBe(taken);
    expect(inbox.received[1]!.body).toBe(inbox.received[0]!.body);
    await until(async () => (await get(`/webhooks/${id}/events/${taken}`)).body.status === 'success', 'the replay recorded');

    // Refused again: tried at once, then 50 ms later, then it waits a minute, as a new event would.
    answer = 500;
    expect((await replay(id, failing!)).status).toBe(200);
    await refusalRecorded(id, failing!, 2);
    const failed = await get(`/webhooks/${id}/events/${failing}`);
    expect(failed.body).toMatchObject({ status: 'attempting', attempts: 2, last_status_code: 500 });
    expect(Date.parse(failed.body.next_attempt_at)).toBeGreaterThan(Date.now() + 50_000);
    expect(inbox.received.filter((r) => r.id === failing)).toHaveLength(2);
    expect((await get(`/webhooks/${id}`)).body.status).toBe('enabled');
  });

  it('answers 404 for an unknown webhook or event, and 422 for a malformed id or a disabled webhook', async () => {
    const inbox = await receiver();
    const id = await webhook(inbox.url, ['email.sent']);
    await sentEmails(1);
    const [event] = (await get(`/webhooks/${id}/events`)).body.data;
    const unknownWebhook = crypto.randomUUID();

    expect(await get(`/webhooks/${unknownWebhook}/events`)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Webhook not found' } });
    expect((await get(`/webhooks/${unknownWebhook}/events/${event.id}`)).status).toBe(404);
    expect(await get(`/webhooks/${id}/events/${UNKNOWN_EVENT}`)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Webhook event not found' } });
    expect((await replay(id, UNKNOWN_EVENT)).status).toBe(404);
    expect((await replay(unknownWebhook, event.id)).status).toBe(404);

    for (const path of [`/webhooks/${id}/events/not-an-id`, `/webhooks/${id}/events/${event.id}x`, `/webhooks/${id}/events?limit=0`, `/webhooks/${id}/events?limit=101`, `/webhooks/${id}/events?after=${crypto.randomUUID()}`]) {
      const res = await get(path);
      expect(res.status, path).toBe(422);
      expect(res.body.statusCode).toBe(422);
    }
    expect((await get(`/webhooks/${id}/events?after=${event.id}&before=${event.id}`)).status).toBe(422);

    const disabled = await server.request(`/webhooks/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ status: 'disabled' }) });
    expect(disabled.status).toBe(200);
    expect(await replay(id, event.id)).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The webhook is disabled; enable it to replay its events.' } });
  });
});
