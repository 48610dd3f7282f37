// The webhook outbox, on SQLite and PostgreSQL: events recorded as the server's transitions record
// them reach a receiver on 127.0.0.1, signed as Standard Webhooks and shaped as the contract's
// `webhooks` section says; failures (an error status, a closed port, no answer) are retried with the
// same svix-id until the receiver takes them; a webhook that keeps failing is disabled; disabled
// webhooks and types not asked for get nothing; and non-public addresses are not posted to.
import { lookup } from 'node:dns/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { pino } from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadSpec, schemaCompiler } from '../../server/contract.ts';
import { nonPublicKind } from '../../server/webhooks/address.ts';
import { publicOnlyLookup } from '../../server/webhooks/endpoint.ts';
import { DEFAULT_WEBHOOKS, WebhookDispatcher, type WebhookOptions } from '../../server/webhooks/dispatch.ts';
import { backends } from '../support/backends.ts';
import { closedPort, emailEvent, emailRecord, recordEvents, startReceiver, until, type Received, type Receiver } from '../support/receiver.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { sleep, takeTableAway } from './faults.ts';

const compile = schemaCompiler(loadSpec());
const schemaName = (type: string) => `WebhookEvent${type.split(/[._]/).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}`;
/** Fast retries for tests: 4 attempts, 50 ms apart. */
const QUICK: WebhookOptions = { ...DEFAULT_WEBHOOKS, allowPrivate: true, retryScheduleMs: [50, 50, 50], timeoutMs: 2_000, leaseMs: 5_000, idleMs: 20 };
// The machine's own name resolves to one of its addresses, which in a container or on a laptop is not a public one.
const ownName = hostname();
const ownAddresses = await lookup(ownName, { all: true }).catch(() => []);
const BOUNCE = { bounce: { type: 'Permanent', subType: 'NoEmail', message: 'No such user', diagnosticCode: ['smtp; 550 5.1.1 user unknown'] } };

describe.each(backends)('webhook deliveries on %s', (backend) => {
  let server: TestServer;
  let dispatcher: WebhookDispatcher | undefined;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { webhooks: { ...QUICK } } });
  });
  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    // Each test starts with no webhook and nothing owed.
    await server.store.database.db.deleteFrom('webhook_deliveries').execute();
    await server.store.database.db.deleteFrom('webhooks').execute();
  });
  afterAll(async () => server?.close());

  const db = () => server.store.database.db;
  function dispatch(options: Partial<WebhookOptions> = {}) {
    dispatcher = new WebhookDispatcher(server.store, pino({ level: 'silent' }), { ...QUICK, ...options });
    dispatcher.start();
  }
  async function receiver(answer?: Parameters<typeof startReceiver>[0], port?: number) {
    const started = await startReceiver(answer, port);
    receivers.push(started);
    return started;
  }
  async function webhook(endpoint: string, events: string[]): Promise<{ id: string; signing_secret: string }> {
    const res = await server.request('/webhooks', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ endpoint, events }) });
    expect(res.status).toBe(201);
    return res.json();
  }
  const deliveries = (webhookId: string) => db().selectFrom('webhook_deliveries').selectAll().where('webhook_id', '=', webhookId).execute();
  /** Verifies a delivery as a receiver would, with the standardwebhooks package, and returns its payload. */
  function verified(received: Received, secret: string) {
    const { headers } = received;
    const svix = { 'webhook-id': String(headers['svix-id']), 'webhook-timestamp': String(headers['svix-timestamp']), 'webhook-signature': String(headers['svix-signature']) };
    const payload = new Webhook(secret).verify(received.body, svix) as { type: string; created_at: string; data: Record<string, unknown> };
    expect(new Webhook(secret).verify(received.body, headers as Record<string, string>)).toEqual(payload);
    return payload;
  }

  it('posts each event a webhook asked for, signed, in the shape the contract declares', async () => {
    const inbox = await receiver();
    const { id, signing_secret } = await webhook(inbox.url, ['email.sent', 'email.bounced', 'email.delivery_delayed', 'contact.created']);
    const email = emailRecord({ tags: JSON.stringify([{ name: 'category', value: 'welcome' }]), headers: JSON.stringify({ 'X-Entity-Ref-ID': 'order-1' }), message_id: '<m1@acme.dev>' });
    const contact = { id: crypto.randomUUID(), email: 'c@example.com', first_name: 'Ada', last_name: null, unsubscribed: false, segment_ids: [crypto.randomUUID()], created_at: email.created_at, updated_at: email.created_at };
    await recordEvents(
      server.store,
      [
        emailEvent('email.sent', email),
        emailEvent('email.delivery_delayed', email, { reason: 'connect ECONNREFUSED' }),
        emailEvent('email.bounced', email, BOUNCE),
        emailEvent('email.delivered', email),
        { type: 'contact.created', contact_id: contact.id, data: contact, created_at: contact.created_at },
      ],
      [email],
    );
    dispatch();
    await until(() => inbox.received.length >= 4, () => `${inbox.received.length} of 4 received`);
    const payloads = inbox.received.map((r) => verified(r, signing_secret));
    expect(payloads.map((p) => p.type).sort()).toEqual(['contact.created', 'email.bounced', 'email.delivery_delayed', 'email.sent']);
    for (const payload of payloads) {
      const validate = compile(`/components/schemas/${schemaName(payload.type)}`);
      expect(validate(payload), `${payload.type}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
    const bounced = payloads.find((p) => p.type === 'email.bounced')!;
    expect(bounced.data).toEqual({
      email_id: email.id, created_at: email.created_at, from: 'Acme <news@acme.dev>', to: ['reader@example.com'], subject: 'Hello', message_id: '<m1@acme.dev>',
      tags: { category: 'welcome' }, headers: [{ name: 'X-Entity-Ref-ID', value: 'order-1' }], ...BOUNCE,
    });
    expect(payloads.find((p) => p.type === 'email.delivery_delayed')!.data.reason).toBe('connect ECONNREFUSED');
    expect(payloads.find((p) => p.type === 'contact.created')!.data).toEqual(contact);
    expect(inbox.received.every((r) => r.headers['content-type'] === 'application/json' && r.headers['webhook-id'] === r.headers['svix-id'])).toBe(true);
    await until(async () => (await deliveries(id)).every((d) => d.state === 'delivered'), 'every delivery recorded delivered');
    expect(new Set((await deliveries(id)).map((d) => d.id))).toEqual(inbox.ids());
    expect(inbox.received).toHaveLength(4);
  });

  it('tries again with the same svix-id while the receiver answers 500, until it takes every event', async () => {
    const inbox = await receiver((_, seen) => (seen < 2 ? 500 : 200));
    const { id, signing_secret } = await webhook(inbox.url, ['email.sent']);
    const emails = Array.from({ length: 20 }, () => emailRecord());
    await recordEvents(server.store, emails.map((e) => emailEvent('email.sent', e)), emails);
    dispatch();
    await until(async () => (await deliveries(id)).every((d) => d.state === 'delivered'), 'every delivery delivered');
    expect(inbox.ids().size).toBe(20);
    expect(inbox.received).toHaveLength(60);
    for (const svixId of inbox.ids()) {
      const attempts = inbox.received.filter((r) => r.id === svixId);
      expect(new Set(attempts.map((r) => verified(r, signing_secret).data.email_id)).size).toBe(1);
    }
    expect((await deliveries(id)).map((d) => [d.attempts, d.last_status])).toEqual(Array(20).fill([3, 200]));
  });

  it('records an answer carrying a NUL, which PostgreSQL cannot store, with U+FFFD, and the outcomes recorded beside it', async () => {
    const refusing = createServer((_req, res) => res.writeHead(500).end('broken\0answer'));
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    try {
      const inbox = await receiver();
      const bad = await webhook(`http://127.0.0.1:${(refusing.address() as AddressInfo).port}/hooks`, ['email.sent']);
      const good = await webhook(inbox.url, ['email.sent']);
      const emails = Array.from({ length: 10 }, () => emailRecord());
      await recordEvents(server.store, emails.map((e) => emailEvent('email.sent', e)), emails);
      dispatch({ retryScheduleMs: [60_000] });
      await until(async () => (await deliveries(bad.id)).every((d) => d.attempts === 1 && d.last_status === 500), 'every refusal recorded');
      expect(new Set((await deliveries(bad.id)).map((d) => [d.state, d.last_error].join(' ')))).toEqual(new Set(['pending HTTP 500: broken\uFFFDanswer']));
      await until(async () => (await deliveries(good.id)).every((d) => d.state === 'delivered'), 'every delivery to the other webhook delivered');
      expect(inbox.received).toHaveLength(10);
    } finally {
      refusing.closeAllConnections();
      await new Promise((resolve) => refusing.close(resolve));
    }
  });

  it('keeps a delivery while the receiver is down, and delivers it once the port answers', async () => {
    const port = await closedPort();
    const { id } = await webhook(`http://127.0.0.1:${port}/hooks`, ['email.failed']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.failed', email, { failed: { reason: 'relay refused' } })], [email]);
    dispatch({ retryScheduleMs: [300, 300, 300, 300, 300] });
    await until(async () => (await deliveries(id))[0]?.last_error?.includes('ECONNREFUSED') ?? false, 'a refused connection recorded');
    expect((await deliveries(id))[0]!.state).toBe('pending');
    const inbox = await receiver(() => 200, port);
    await until(async () => (await deliveries(id))[0]!.state === 'delivered', async () => JSON.stringify(await deliveries(id)));
    expect(inbox.received).toHaveLength(1);
    expect(JSON.parse(inbox.received[0]!.body).data.failed).toEqual({ reason: 'relay refused' });
  });

  it('gives an attempt up after the timeout and tries again', async () => {
    const inbox = await receiver((_, seen) => (seen === 0 ? 'hang' : 200));
    const { id } = await webhook(inbox.url, ['email.delivered']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.delivered', email)], [email]);
    dispatch({ timeoutMs: 300 });
    await until(async () => (await deliveries(id))[0]?.state === 'delivered', 'delivered after a time-out');
    const [row] = await deliveries(id);
    expect(row!.attempts).toBe(2);
    expect(inbox.received.map((r) => r.id)).toEqual([row!.id, row!.id]);
  });

  it('ends a delivery failed after its last attempt, and disables a webhook whose deliveries keep failing', async () => {
    const inbox = await receiver(() => 503);
    const { id } = await webhook(inbox.url, ['email.sent']);
    const emails = [emailRecord(), emailRecord()];
    await recordEvents(server.store, emails.map((e) => emailEvent('email.sent', e)), emails);
    dispatch({ disableAfterFailed: 2 });
    await until(async () => (await server.store.webhooks.find(id))!.status === 'disabled', 'the webhook disabled');
    const rows = await deliveries(id);
    expect(rows.map((d) => [d.state, d.attempts, d.last_status])).toEqual([['failed', 4, 503], ['failed', 4, 503]]);
    expect(rows[0]!.last_error).toMatch(/^HTTP 503/);
    const got = await (await server.request(`/webhooks/${id}`)).json();
    expect(got.status_reason).toMatch(/^Disabled by the server: 2 deliveries in a row failed every attempt, the last with HTTP 503/);
    expect(inbox.received).toHaveLength(8);
    // Disabled: later events owe it nothing.
    const later = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', later)], [later]);
    expect(await deliveries(id)).toHaveLength(2);
    // Enabled again: the reason goes, and one more failure does not disable it at once.
    await server.request(`/webhooks/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ status: 'enabled' }) });
    expect((await (await server.request(`/webhooks/${id}`)).json()).status_reason).toBeNull();
    const again = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', again)], [again]);
    await until(async () => (await deliveries(id)).filter((d) => d.state === 'failed').length === 3, 'a third delivery failed');
    expect((await server.store.webhooks.find(id))!.status).toBe('enabled');
  });

  it('one success between failures keeps the webhook enabled', async () => {
    const inbox = await receiver((received) => (JSON.parse(received.body).data.subject === 'ok' ? 200 : 500));
    const { id } = await webhook(inbox.url, ['email.sent']);
    dispatch({ disableAfterFailed: 2 });
    for (const subject of ['bad', 'ok', 'bad']) {
      const email = emailRecord({ subject });
      await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
      await until(async () => (await deliveries(id)).every((d) => d.state !== 'pending'), `the ${subject} delivery ended`);
    }
    expect((await deliveries(id)).map((d) => d.state).sort()).toEqual(['delivered', 'failed', 'failed']);
    expect((await server.store.webhooks.find(id))!.status).toBe('enabled');
  });

  it('deletes ended deliveries once they are older than it keeps them, oldest first, and never one still owed', async () => {
    const inbox = await receiver();
    const { id } = await webhook(inbox.url, ['email.sent']);
    const emails = [emailRecord(), emailRecord()];
    await recordEvents(server.store, emails.map((email) => emailEvent('email.sent', email)), emails);
    dispatch();
    await until(async () => (await deliveries(id)).every((d) => d.state === 'delivered'), 'both delivered');
    await dispatcher!.stop();
    dispatcher = undefined;
    const [older, newer] = (await deliveries(id)).map((d) => d.id).sort();
    await db().updateTable('webhook_deliveries').set({ state: 'failed' }).where('id', '=', newer!).execute();
    const owed = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', owed)], [owed]);
    const { webhookDeliveries } = server.store;

    expect(await webhookDeliveries.purgeEnded(new Date(Date.now() - 60_000))).toBe(0);
    expect(await webhookDeliveries.purgeEnded(new Date(Date.now() + 1000), 1)).toBe(1);
    expect((await deliveries(id)).map((d) => d.id)).not.toContain(older);
    expect(await webhookDeliveries.purgeEnded(new Date(Date.now() + 1000))).toBe(1);
    expect((await deliveries(id)).map((d) => d.state)).toEqual(['pending']);

    // The outbox purges as it starts, and every minute after: here it keeps nothing that has ended.
    const more = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', more)], [more]);
    await db().updateTable('webhook_deliveries').set({ state: 'delivered' }).where('webhook_id', '=', id).execute();
    await new Promise((resolve) => setTimeout(resolve, 5)); // ids tell milliseconds: one made in the purge's own is kept
    dispatch({ keepEndedMs: 0 });
    await until(async () => (await deliveries(id)).length === 0, 'every ended delivery purged');
    expect(inbox.received).toHaveLength(2);
  });

  it('sends nothing to a disabled webhook or for a type it did not ask for, and drops what a disabled or deleted one was owed', async () => {
    const inbox = await receiver();
    const sent = await webhook(inbox.url, ['email.sent']);
    const disabled = await webhook(inbox.url, ['email.sent', 'email.delivered']);
    const deleted = await webhook(inbox.url, ['email.sent']);
    await server.request(`/webhooks/${disabled.id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ status: 'disabled' }) });
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email), emailEvent('email.delivered', email)], [email]);
    expect(await deliveries(disabled.id)).toHaveLength(0);
    expect(await deliveries(deleted.id)).toHaveLength(1);
    await server.request(`/webhooks/${deleted.id}`, { method: 'DELETE' });
    expect(await deliveries(deleted.id)).toHaveLength(0);
    dispatch();
    await until(async () => (await deliveries(sent.id)).every((d) => d.state === 'delivered'), 'delivered');
    expect(inbox.received.map((r) => JSON.parse(r.body).type)).toEqual(['email.sent']);
    expect((await deliveries(sent.id))[0]!.id).toBe(inbox.received[0]!.id);
  });

  it('drops a delivery whose webhook was disabled after the event owed it', async () => {
    const inbox = await receiver();
    const { id } = await webhook(inbox.url, ['email.sent']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
    // As if disabled in the moment between the event's transaction and the claim.
    await db().updateTable('webhooks').set({ status: 'disabled' }).where('id', '=', id).execute();
    dispatch();
    await until(async () => (await deliveries(id)).length === 0, 'the delivery dropped');
    expect(inbox.received).toHaveLength(0);
  });

  it('drops what a webhook was owed for an event type it has since stopped asking for', async () => {
    const inbox = await receiver();
    const { id } = await webhook(inbox.url, ['email.sent', 'email.delivered']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email), emailEvent('email.delivered', email)], [email]);
    expect(await deliveries(id)).toHaveLength(2);
    const changed = await server.request(`/webhooks/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ events: ['email.delivered'] }) });
    expect(changed.status).toBe(200);
    dispatch();
    await until(async () => (await deliveries(id)).every((d) => d.state === 'delivered'), 'the one still asked for delivered');
    expect(await deliveries(id)).toHaveLength(1);
    expect(inbox.received.map((r) => JSON.parse(r.body).type)).toEqual(['email.delivered']);
  });

  it('signs with the previous secret as well for a day after a rotation, and with the new one alone after', async () => {
    const inbox = await receiver();
    const { id, signing_secret: previous } = await webhook(inbox.url, ['email.sent']);
    const rotated = await server.request(`/webhooks/${id}/signing-secret/rotate`, { method: 'POST' });
    const current = ((await rotated.json()) as { signing_secret: string }).signing_secret;
    const signature = compile('/components/schemas/WebhookSignature');
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
    dispatch();
    await until(() => inbox.received.length === 1, 'the delivery during the day');
    const during = inbox.received[0]!;
    expect(String(during.headers['svix-signature']).split(' ')).toHaveLength(2);
    expect(signature(during.headers['svix-signature'])).toBe(true);
    expect(verified(during, current).data.email_id).toBe(email.id);
    expect(verified(during, previous).data.email_id).toBe(email.id);

    await db().updateTable('webhooks').set({ previous_secret_expires_at: new Date(Date.now() - 1000).toISOString() }).where('id', '=', id).execute();
    const later = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', later)], [later]);
    await until(() => inbox.received.length === 2, 'the delivery after the day');
    const after = inbox.received[1]!;
    expect(String(after.headers['svix-signature']).split(' ')).toHaveLength(1);
    expect(signature(after.headers['svix-signature'])).toBe(true);
    expect(verified(after, current).data.email_id).toBe(later.id);
    expect(() => verified(after, previous)).toThrow();
  });

  it('reads again what a claim needs when the database fails after the claim, instead of waiting out the lease', async () => {
    const inbox = await receiver();
    await webhook(inbox.url, ['email.sent']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
    // The events, read after the claim, are away for 300 ms; the claim lasts a minute.
    const bringBack = await takeTableAway(db(), 'events');
    const back = sleep(300).then(bringBack);
    try {
      dispatch({ leaseMs: 60_000 });
      await until(() => inbox.received.length === 1, 'the event posted within the claim', 5_000);
    } finally {
      await back;
    }
  });

  it('does not post to a loopback address unless private addresses are allowed, nor connect to a name that resolves to one', async () => {
    const inbox = await receiver();
    const { id } = await webhook(`https://127.0.0.1:${inbox.port}/hooks`, ['email.sent']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
    dispatch({ allowPrivate: false, retryScheduleMs: [60_000] });
    await until(async () => (await deliveries(id))[0]?.attempts === 1 && (await deliveries(id))[0]?.last_error !== null, 'one attempt recorded');
    expect((await deliveries(id))[0]!.last_error).toBe('not posted: the endpoint host 127.0.0.1 is a loopback address');
    expect(inbox.received).toHaveLength(0);
    const refused = await new Promise<NodeJS.ErrnoException | null>((resolve) => publicOnlyLookup('localhost', { all: true }, (error) => resolve(error)));
    expect(refused?.code).toBe('ENOTPUBLIC');
    expect(refused?.message).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), a loopback address/);
  });

  it('does not follow a redirect: a 3xx is a failed attempt, tried again', async () => {
    const inbox = await receiver((_, seen) => (seen === 0 ? 301 : 200));
    const { id } = await webhook(inbox.url, ['email.sent']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
    dispatch({ retryScheduleMs: [60_000] });
    await until(async () => (await deliveries(id))[0]?.last_status === 301, 'the redirect recorded');
    expect((await deliveries(id))[0]).toMatchObject({ state: 'pending', attempts: 1, last_error: 'HTTP 301: refused with 301' });
    expect(inbox.received).toHaveLength(1);
  });

  it.runIf(ownAddresses.length > 0 && ownAddresses.every((a) => nonPublicKind(a.address)))(`resolves a host name at delivery and does not connect when it is not public (${ownName})`, async () => {
    const inbox = await receiver();
    // https: the lookup refuses before any TLS is spoken, so the plain receiver is never reached either way.
    const { id } = await webhook(`https://${ownName}:${inbox.port}/hooks`, ['email.sent']);
    const email = emailRecord();
    await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
    dispatch({ allowPrivate: false, retryScheduleMs: [60_000] });
    await until(async () => Boolean((await deliveries(id))[0]?.last_error), 'one attempt recorded');
    expect((await deliveries(id))[0]!.last_error).toMatch(new RegExp(`^${ownName} resolves to .*: not connecting$`));
    expect(inbox.received).toHaveLength(0);
  });

  it('delivers 300 events over bounded concurrency, each exactly once when the receiver takes each', async () => {
    let inFlight = 0;
    let most = 0;
    const inbox = await receiver(async () => {
      most = Math.max(most, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 5));
      inFlight--;
      return 204;
    });
    const { id } = await webhook(inbox.url, ['email.sent']);
    const emails = Array.from({ length: 300 }, () => emailRecord());
    await recordEvents(server.store, emails.map((e) => emailEvent('email.sent', e)), emails);
    dispatch({ concurrency: 8 });
    await until(async () => (await deliveries(id)).every((d) => d.state === 'delivered'), 'all delivered');
    expect(inbox.received).toHaveLength(300);
    expect(inbox.ids().size).toBe(300);
    expect(most).toBeLessThanOrEqual(8);
    expect(most).toBeGreaterThan(1);
  });

  it("goes on posting to other webhooks while one's endpoint hangs with a backlog older than theirs", async () => {
    const hanging = await receiver(() => 'hang');
    const healthy = await receiver();
    await webhook(hanging.url, ['email.sent']);
    const { id } = await webhook(healthy.url, ['email.delivered']);
    const backlog = Array.from({ length: 100 }, () => emailRecord());
    await recordEvents(server.store, backlog.map((e) => emailEvent('email.sent', e)), backlog);
    const later = Array.from({ length: 20 }, () => emailRecord());
    await recordEvents(server.store, later.map((e) => emailEvent('email.delivered', e)), later);
    // Oldest due first across all webhooks, the hanging one held every slot for a timeout after
    // another: 100 / 10 × 3 s before the first of the others' events. Each holds its share now.
    const started = Date.now();
    dispatch({ concurrency: 10, timeoutMs: 3_000 });
    await until(async () => (await deliveries(id)).every((d) => d.state === 'delivered'), "the healthy webhook's events delivered");
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(healthy.ids().size).toBe(20);
    expect(hanging.received.length).toBeLessThanOrEqual(5);
  });
});
