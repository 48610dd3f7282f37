// The official `resend` SDK's webhooks, pointed at a live Mailroom by its base URL alone, on SQLite and
// PostgreSQL: create, get, list, update, remove and rotateSigningSecret answer with `error: null` and
// the fields the SDK declares, and `resend.webhooks.verify` accepts every delivery a receiver on
// 127.0.0.1 got, with the old secret or the new one the day after a rotation. `webhooks.events` lists,
// gets and replays what a webhook was sent.
import { pino } from 'pino';
import { Resend, type WebhookEvent } from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { WebhookDispatcher } from '../../server/webhooks/dispatch.ts';
import { backends } from '../support/backends.ts';
import { emailEvent, emailRecord, recordEvents, startReceiver, until } from '../support/receiver.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const uuid = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe.each(backends)('the resend SDK webhooks on %s', (backend) => {
  let server: TestServer;
  let resend: Resend;
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { webhooks: { ...loadConfig({}).webhooks, allowPrivate: true } } });
    resend = new Resend(server.apiKey, { baseUrl: server.url });
  });
  afterAll(() => server.close());

  it('creates, gets, lists, updates and removes a webhook', async () => {
    const created = await resend.webhooks.create({ endpoint: 'https://hooks.acme.dev/mailroom', events: ['email.sent', 'email.bounced'] });
    expect(created).toMatchObject({ data: { object: 'webhook', id: uuid, signing_secret: expect.stringMatching(/^whsec_/) }, error: null });
    const { id, signing_secret } = created.data!;

    const got = await resend.webhooks.get(id);
    expect(got.error).toBeNull();
    expect(got.data).toEqual({ object: 'webhook', id, endpoint: 'https://hooks.acme.dev/mailroom', events: ['email.sent', 'email.bounced'], status: 'enabled', status_reason: null, created_at: timestamp, signing_secret });

    const listed = await resend.webhooks.list({ limit: 10 });
    expect(listed.error).toBeNull();
    expect(listed.data).toMatchObject({ object: 'list', has_more: false });
    expect(listed.data!.data).toContainEqual({ object: 'webhook', id, endpoint: 'https://hooks.acme.dev/mailroom', events: ['email.sent', 'email.bounced'], status: 'enabled', status_reason: null, created_at: timestamp });
    expect((await resend.webhooks.list()).data!.data.map((w) => w.id)).toContain(id);

    const updated = await resend.webhooks.update(id, { endpoint: 'https://hooks.acme.dev/v2', events: ['email.delivered'], status: 'disabled' });
    expect(updated).toEqual({ data: { object: 'webhook', id }, error: null, headers: expect.anything() });
    expect((await resend.webhooks.get(id)).data).toMatchObject({ endpoint: 'https://hooks.acme.dev/v2', events: ['email.delivered'], status: 'disabled' });

    const removed = await resend.webhooks.remove(id);
    expect(removed).toMatchObject({ data: { object: 'webhook', id, deleted: true }, error: null });
    expect((await resend.webhooks.get(id)).error).toMatchObject({ name: 'not_found', statusCode: 404, message: 'Webhook not found' });
    expect((await resend.webhooks.create({ endpoint: 'https://hooks.acme.dev/x', events: [] })).error).toMatchObject({ name: 'validation_error', statusCode: 422 });
  });

  it('subscribes to every event the SDK names, those Mailroom never sends included', async () => {
    // A record, so that the compiler says when an SDK release names an event this list lacks.
    const every: Record<WebhookEvent, true> = {
      'email.sent': true, 'email.scheduled': true, 'email.delivered': true, 'email.delivery_delayed': true, 'email.complained': true,
      'email.bounced': true, 'email.opened': true, 'email.clicked': true, 'email.received': true, 'email.failed': true,
      'email.suppressed': true, 'contact.created': true, 'contact.updated': true, 'contact.deleted': true,
      'contact.topics.updated': true, 'domain.created': true, 'domain.updated': true, 'domain.deleted': true,
      'suppression.added': true, 'suppression.removed': true, 'topic.created': true, 'topic.updated': true, 'topic.deleted': true,
      'inbox.created': true, 'inbox.updated': true, 'inbox.deleted': true, 'inbox.thread.created': true,
      'inbox.thread.folder.updated': true, 'inbox.thread.assigned': true, 'inbox.thread.unassigned': true,
      'inbox.thread.labels.updated': true, 'inbox.email.received': true, 'inbox.email.sent': true,
      'inbox.draft.created': true, 'inbox.draft.updated': true, 'inbox.draft.sent': true, 'inbox.draft.deleted': true,
    };
    const events = Object.keys(every) as WebhookEvent[];
    const created = await resend.webhooks.create({ endpoint: 'https://hooks.acme.dev/everything', events });
    expect(created.error).toBeNull();
    expect((await resend.webhooks.get(created.data!.id)).data!.events).toEqual(events);
  });

  it('rotates a signing secret; verify takes the new secret, and the old one for the day after', async () => {
    const inbox = await startReceiver(() => 200);
    const dispatcher = new WebhookDispatcher(server.store, pino({ level: 'silent' }), { ...server.config.webhooks, idleMs: 20 });
    try {
      const { data: created } = await resend.webhooks.create({ endpoint: inbox.url, events: ['email.sent'] });
      const rotated = await resend.webhooks.rotateSigningSecret(created!.id);
      expect(rotated).toMatchObject({ data: { object: 'webhook', id: created!.id, signing_secret: expect.stringMatching(/^whsec_/) }, error: null });
      expect(rotated.data!.signing_secret).not.toBe(created!.signing_secret);
      expect((await resend.webhooks.get(created!.id)).data!.signing_secret).toBe(rotated.data!.signing_secret);
      const email = emailRecord();
      await recordEvents(server.store, [emailEvent('email.sent', email)], [email]);
      dispatcher.start();
      await until(() => inbox.received.length === 1, 'the delivery');
      const [r] = inbox.received;
      const headers = { id: String(r!.headers['svix-id']), timestamp: String(r!.headers['svix-timestamp']), signature: String(r!.headers['svix-signature']) };
      for (const webhookSecret of [rotated.data!.signing_secret, created!.signing_secret]) {
        expect(resend.webhooks.verify({ payload: r!.body, headers, webhookSecret })).toMatchObject({ type: 'email.sent', data: { email_id: email.id } });
      }
      expect((await resend.webhooks.rotateSigningSecret('00000000-0000-4000-8000-000000000000')).error).toMatchObject({ name: 'not_found', statusCode: 404 });
    } finally {
      await dispatcher.stop();
      await inbox.close();
    }
  });

  it('verify accepts every delivery the receiver got, retries included', async () => {
    const inbox = await startReceiver((_, seen) => (seen === 0 ? 500 : 200));
    const dispatcher = new WebhookDispatcher(server.store, pino({ level: 'silent' }), { ...server.config.webhooks, retryScheduleMs: [20, 20], idleMs: 20 });
    try {
      const { data } = await resend.webhooks.create({ endpoint: inbox.url, events: ['email.sent', 'email.delivered', 'email.bounced'] });
      const email = emailRecord();
      const bounce = { bounce: { type: 'Permanent', subType: 'General', message: 'Refused', diagnosticCode: ['smtp; 550 5.7.1 refused'] } };
      await recordEvents(server.store, [emailEvent('email.sent', email), emailEvent('email.delivered', email), emailEvent('email.bounced', email, bounce)], [email]);
      dispatcher.start();
      await until(() => inbox.received.length >= 6, 'each delivered after a retry');
      const events = inbox.received.map((r) =>
        resend.webhooks.verify({
          payload: r.body,
          headers: { id: String(r.headers['svix-id']), timestamp: String(r.headers['svix-timestamp']), signature: String(r.headers['svix-signature']) },
          webhookSecret: data!.signing_secret,
        }),
      );
      expect(events).toHaveLength(6);
      expect(new Set(events.map((e) => e.type))).toEqual(new Set(['email.sent', 'email.delivered', 'email.bounced']));
      const bounced = events.find((e) => e.type === 'email.bounced');
      expect(bounced).toMatchObject({ data: { email_id: email.id, to: ['reader@example.com'], ...bounce } });
      expect(() =>
        resend.webhooks.verify({ payload: `${inbox.received[0]!.body} `, headers: { id: inbox.received[0]!.id, timestamp: String(inbox.received[0]!.headers['svix-timestamp']), signature: String(inbox.received[0]!.headers['svix-signature']) }, webhookSecret: data!.signing_secret }),
      ).toThrow();
    } finally {
      await dispatcher.stop();
      await inbox.close();
    }
  });

  it('events lists, gets and replays what a webhook was sent', async () => {
    const inbox = await startReceiver();
    const dispatcher = new WebhookDispatcher(server.store, pino({ level: 'silent' }), { ...server.config.webhooks, idleMs: 20 });
    try {
      const { data } = await resend.webhooks.create({ endpoint: inbox.url, events: ['email.sent', 'email.delivered'] });
      const webhookId = data!.id;
      const email = emailRecord();
      await recordEvents(server.store, [emailEvent('email.sent', email), emailEvent('email.delivered', email)], [email]);
      dispatcher.start();
      await until(() => inbox.received.length >= 2, 'both events posted');
      await until(async () => (await resend.webhooks.events.list({ webhookId })).data?.data.every((e) => e.status === 'success') ?? false, 'both recorded');

      const listed = await resend.webhooks.events.list({ webhookId, limit: 1 });
      expect(listed).toMatchObject({ data: { object: 'list', has_more: true, data: [{ id: expect.stringMatching(/^msg_/), type: expect.stringMatching(/^email\./), created_at: timestamp, status: 'success' }] }, error: null });
      const next = await resend.webhooks.events.list({ webhookId, limit: 1, after: listed.data!.data[0]!.id });
      expect(next.data).toMatchObject({ has_more: false, data: [{ status: 'success' }] });
      const ids = [listed.data!.data[0]!.id, next.data!.data[0]!.id];
      expect(new Set(ids)).toEqual(inbox.ids());

      const got = await resend.webhooks.events.get({ webhookId, eventId: ids[0]! });
      expect(got).toMatchObject({ data: { object: 'webhook_event', id: ids[0], status: 'success', next_attempt_at: null }, error: null });
      const posted = inbox.received.find((r) => r.id === ids[0])!;
      expect(got.data!.payload).toEqual(JSON.parse(posted.body));

      const replayed = await resend.webhooks.events.replay({ webhookId, eventId: ids[0]! });
      expect(replayed).toEqual({ data: { object: 'webhook_event', id: ids[0] }, error: null, headers: expect.anything() });
      await until(() => inbox.received.length >= 3, 'the replay posted');
      const again = inbox.received[2]!;
      expect(again.id).toBe(ids[0]);
      expect(resend.webhooks.verify({ payload: again.body, headers: { id: again.id, timestamp: String(again.headers['svix-timestamp']), signature: String(again.headers['svix-signature']) }, webhookSecret: data!.signing_secret })).toEqual(
        JSON.parse(posted.body),
      );
      expect((await resend.webhooks.events.get({ webhookId, eventId: 'msg_000000000000AAAAAAAAAAAA' })).error).toMatchObject({ name: 'not_found', statusCode: 404 });
    } finally {
      await dispatcher.stop();
      await inbox.close();
    }
  });
});
