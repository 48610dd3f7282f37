// Events on SQLite and PostgreSQL: one per transition of an email (sent; sent and delivered where the
// transport is final; delayed; failed; canceled by the worker or with its broadcast) and per change of
// a contact, each with its data, recorded with the change; and the webhook deliveries owed for each.
// How they read back (GET /emails, an email's timeline) is in email-log.test.ts.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { captureTransport, smtpTransport } from '../../server/delivery/transport.ts';
import type { EmailRecord } from '../../server/store/emails.ts';
import { backends, postgresSchema } from '../support/backends.ts';
import { withWorkers, type WorkerOptions } from '../support/delivery.ts';
import { startServerProcess } from '../support/process.ts';
import { addContacts, addSegment } from '../support/recipients.ts';
import { TEST_KEY, withServer } from '../support/server.ts';
import { startSmtpSink, withSink } from '../support/smtp.ts';
import { until } from '../support/until.ts';

const fast: WorkerOptions = { idleMs: 10, retryBaseMs: 10, maxAttempts: 3, serverLinks: true };
const json = { 'content-type': 'application/json' };
const later = (ms: number) => new Date(Date.now() + ms);

describe.each(backends)('events on %s', (backend) => {
  const server = withServer(backend);
  const sink = withSink();
  const worker = withWorkers(server, sink, fast);
  const db = () => server.store.database.db;

  beforeEach(async () => {
    sink.refuse = () => undefined;
    // Nothing else due: each round below takes exactly the emails its test sends.
    await db().updateTable('emails').set({ last_event: 'failed' }).where('last_event', 'in', ['queued', 'delivery_delayed']).execute();
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await server.request(path, { method, headers: json, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  };
  async function send(count = 1, fields: Record<string, unknown> = {}): Promise<string[]> {
    const items = Array.from({ length: count }, (_, n) => ({ from: 'Acme <news@acme.dev>', to: `reader${n}@example.com`, subject: `Hello ${n}`, text: 'x', ...fields }));
    const { status, body } = await call('POST', '/emails/batch', items);
    expect(status, JSON.stringify(body)).toBe(200);
    return body.data.map((d: { id: string }) => d.id);
  }
  /** The events stored for an email (or a contact), oldest first, data parsed. */
  async function eventsOf(column: 'email_id' | 'contact_id', id: string) {
    const rows = await db().selectFrom('events').selectAll().where(column, '=', id).orderBy('created_at').orderBy('id').execute();
    return rows.map((row) => ({ ...row, data: row.data === null ? null : JSON.parse(row.data) }));
  }
  const typesOf = async (emailId: string) => (await eventsOf('email_id', emailId)).map((event) => event.type);
  const lastEvent = async (id: string) => (await call('GET', `/emails/${id}`)).body.last_event;

  describe('emails', () => {
    it("records a relay's acceptance as email.sent alone: the email is sent, not delivered, and the outbox is done with it", async () => {
      const [id] = await send();
      expect(await worker().runOnce()).toBe(1);
      const events = await eventsOf('email_id', id!);
      expect(events).toEqual([{ id: expect.any(String), type: 'email.sent', email_id: id, contact_id: null, data: null, created_at: expect.any(String) }]);
      const stored = (await server.store.emails.find(id!))!;
      expect(stored.last_event).toBe('sent');
      expect(events[0]!.created_at).toBe(stored.updated_at);
      expect(await lastEvent(id!)).toBe('sent');
      expect(await server.store.emails.claimNextBatch(10, later(24 * 3600_000), 1000)).toEqual([]);
    });

    it('records email.sent, then email.delivered, when the transport is the final destination (the capture store)', async () => {
      const ids = await send(30);
      expect(await worker(captureTransport).runOnce()).toBe(30);
      for (const id of ids) {
        const events = await eventsOf('email_id', id);
        expect(events.map((e) => e.type)).toEqual(['email.sent', 'email.delivered']);
        expect(events[0]!.created_at).toBe(events[1]!.created_at);
        expect(await lastEvent(id)).toBe('delivered');
      }
    });

    it('records email.sent and email.delivered for a relay declared final (SMTP_FINAL=true)', async () => {
      expect(loadConfig({}).smtpFinal).toBe(false);
      expect(loadConfig({ SMTP_FINAL: 'true' }).smtpFinal).toBe(true);
      expect(() => loadConfig({ SMTP_FINAL: 'yes' })).toThrow(/SMTP_FINAL must be true or false, got "yes"/);
      const [id] = await send();
      expect(await worker(() => smtpTransport(sink.url, { final: true })).runOnce()).toBe(1);
      expect(await typesOf(id!)).toEqual(['email.sent', 'email.delivered']);
      expect(await lastEvent(id!)).toBe('delivered');
    });

    it('records each delay with the reason, then email.sent', async () => {
      let refusals = 0;
      sink.refuse = () => (refusals++ === 0 ? 451 : undefined);
      const [id] = await send();
      const w = worker();
      await w.runOnce();
      await w.runOnce(later(60_000));
      const events = await eventsOf('email_id', id!);
      expect(events.map((e) => e.type)).toEqual(['email.delivery_delayed', 'email.sent']);
      expect(events[0]!.data).toEqual({ reason: expect.stringMatching(/451.*Try again later/) });
      expect(await lastEvent(id!)).toBe('sent');
    });

    it('records email.failed with the reason, once', async () => {
      // A message that cannot be built fails at once (a relay's 5xx is a bounce: see bounces.test.ts).
      const deep = '<b>'.repeat(20_000) + 'deep' + '</b>'.repeat(20_000);
      const [id] = await send(1, { to: `unbuildable-${backend}@example.com`, text: undefined, html: deep });
      await worker().runOnce();
      const events = await eventsOf('email_id', id!);
      expect(events).toMatchObject([{ type: 'email.failed', data: { failed: { reason: expect.stringMatching(/could not be built/) } } }]);
      const stored = (await server.store.emails.find(id!))!;
      expect(stored.last_event).toBe('failed');
      expect(events[0]!.data.failed.reason).toBe(stored.last_error);
    });

    it('records nothing for an outcome whose lease was lost', async () => {
      const [id] = await send();
      const emails = server.store.emails;
      const [first] = await emails.claimNextBatch(10, new Date(), 1000);
      const [second] = await emails.claimNextBatch(10, later(2000), 60_000);
      expect(await emails.markFailed(first!, 'late', new Date())).toBe(false);
      expect(await emails.markDelayed(first!, 'late', later(1000), new Date())).toBe(false);
      expect(await emails.markCanceled(first!, 'late', new Date())).toBe(false);
      expect(await emails.markDelivered([{ ...first!, messageId: `<${id}@acme.dev>`, text: 'x' }], new Date(), true)).toEqual([]);
      expect(await typesOf(id!)).toEqual([]);
      expect(await emails.markDelivered([{ ...second!, messageId: `<${id}@acme.dev>`, text: 'x' }], new Date(), false)).toEqual([id]);
      expect(await emails.markFailed(second!, 'after the fact', new Date())).toBe(false);
      expect(await typesOf(id!)).toEqual(['email.sent']);
    });

    it('records email.canceled with the reason when a broadcast email’s contact was deleted before delivery', async () => {
      const segment = await addSegment(db());
      const [contact] = await addContacts(db(), [{ email: `gone-${backend}@example.com`, segments: [segment] }]);
      const broadcast = randomUUID();
      const at = new Date().toISOString();
      await db().insertInto('broadcasts').values({ id: broadcast, name: 'b', segment_id: segment, from_address: 'news@acme.dev', subject: 'Hi {{{FIRST_NAME|there}}}', reply_to: null, preview_text: null, html: '<p>Hi</p>', text: null, status: 'sent', topic_id: null, created_at: at, scheduled_at: null, sent_at: at }).execute();
      const email = await outboxRow(broadcast, contact!, `gone-${backend}@example.com`);
      expect((await call('DELETE', `/contacts/${contact}`)).status).toBe(200);
      await worker().runOnce();
      const events = await eventsOf('email_id', email);
      expect(events).toMatchObject([{ type: 'email.canceled', data: { reason: expect.any(String) } }]);
      expect(events[0]!.data.reason.length).toBeGreaterThan(0);
    });

    it('records one email.canceled per waiting email when a broadcast is canceled, none for those in delivery', async () => {
      const segment = await addSegment(db());
      // Queued, its fan-out written by hand below (no fan-out runs here): a scheduled one has no emails yet.
      const broadcast = (await call('POST', '/broadcasts', { segment_id: segment, from: 'news@acme.dev', subject: 'News', html: '<p>Hi</p>', send: true })).body.id;
      const contacts = await addContacts(db(), Array.from({ length: 6 }, (_, i) => ({ email: `cancel-${backend}-${i}@example.com`, segments: [segment] })));
      const emails = [];
      for (const [i, contact] of contacts.entries()) emails.push(await outboxRow(broadcast, contact, `cancel-${backend}-${i}@example.com`));
      const delivering = new Set((await server.store.emails.claimNextBatch(2, new Date(), 60_000)).map((e) => e.id));
      expect(delivering.size).toBe(2);

      expect((await call('POST', `/broadcasts/${broadcast}/cancel`)).status).toBe(200);
      for (const email of emails) {
        const events = await eventsOf('email_id', email);
        if (delivering.has(email)) expect(events).toEqual([]);
        else expect(events).toMatchObject([{ type: 'email.canceled', data: { reason: 'the broadcast was canceled' } }]);
      }
      // Canceling again is refused, and records nothing more.
      expect((await call('POST', `/broadcasts/${broadcast}/cancel`)).status).toBe(422);
      const total = await db().selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n')).where('email_id', 'in', emails).executeTakeFirstOrThrow();
      expect(Number(total.n)).toBe(4);
    });
  });

  /** An outbox row as the fan-out writes it for one recipient of a broadcast. */
  async function outboxRow(broadcastId: string, contactId: string, email: string): Promise<string> {
    const id = randomUUID();
    const at = new Date().toISOString();
    const row: EmailRecord = { id, from_address: 'news@acme.dev', to_addresses: JSON.stringify([email]), cc: null, bcc: null, reply_to: null, subject: 'Hi {{{FIRST_NAME|there}}}', html: null, text: null, headers: null, tags: null, last_event: 'queued', attempts: 0, scheduled_at: null, next_attempt_at: at, message_id: null, last_error: null, created_at: at, updated_at: at, broadcast_id: broadcastId, contact_id: contactId };
    await db().insertInto('emails').values(row).execute();
    return id;
  }

  describe('contacts', () => {
    it('records contact.created with the contact, and nothing when the email exists already', async () => {
      const email = `Ada.${backend}@Lovelace.dev`;
      const created = await call('POST', '/contacts', { email, first_name: 'Ada', properties: { plan: 'pro' } });
      expect(created.status).toBe(201);
      const id = created.body.id;
      const stored = (await server.store.contacts.find('id', id))!;
      expect(await eventsOf('contact_id', id)).toEqual([
        {
          id: expect.any(String),
          type: 'contact.created',
          email_id: null,
          contact_id: id,
          data: { id, email, first_name: 'Ada', last_name: null, unsubscribed: false, segment_ids: [], created_at: stored.created_at, updated_at: stored.updated_at },
          created_at: stored.created_at,
        },
      ]);
      expect((await call('POST', '/contacts', { email: email.toLowerCase(), first_name: 'Other' })).status).toBe(200);
      expect((await call('POST', '/contacts', { email, segments: [await addSegment(db())] })).status).toBe(200);
      expect(await eventsOf('contact_id', id)).toHaveLength(1);
    });

    it('records contact.created for a contact created in segments, and for one created through the legacy audience route', async () => {
      const segment = await addSegment(db());
      const inSegment = await call('POST', '/contacts', { email: `joined-${backend}@example.com`, segments: [segment] });
      expect(inSegment.status).toBe(201);
      const legacy = await call('POST', `/audiences/${segment}/contacts`, { email: `legacy-${backend}@example.com` });
      expect(legacy.status).toBe(201);
      for (const id of [inSegment.body.id, legacy.body.id]) {
        const events = await eventsOf('contact_id', id);
        expect(events.map((e) => e.type)).toEqual(['contact.created']);
        expect(events[0]!.data).toMatchObject({ segment_ids: [segment] });
      }
      // A refused create (an unknown segment) keeps nothing, its event included.
      const refused = await call('POST', '/contacts', { email: `refused-${backend}@example.com`, segments: [randomUUID()] });
      expect(refused.status).toBe(422);
      const count = await db().selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n')).where('type', '=', 'contact.created').where('data', 'like', `%refused-${backend}%`).executeTakeFirstOrThrow();
      expect(Number(count.n)).toBe(0);
    });

    it('records contact.updated with the contact after the change, and contact.deleted with it as it was', async () => {
      const { body } = await call('POST', '/contacts', { email: `grace-${backend}@example.com`, first_name: 'Grace' });
      const id = body.id;
      expect((await call('PATCH', `/contacts/${id}`, { last_name: 'Hopper', unsubscribed: true })).status).toBe(200);
      const updated = (await server.store.contacts.find('id', id))!;
      expect((await call('DELETE', `/contacts/grace-${backend}@example.com`)).status).toBe(200);
      const events = await eventsOf('contact_id', id);
      expect(events.map((e) => e.type)).toEqual(['contact.created', 'contact.updated', 'contact.deleted']);
      const after = { id, email: `grace-${backend}@example.com`, first_name: 'Grace', last_name: 'Hopper', unsubscribed: true, segment_ids: [], created_at: updated.created_at, updated_at: updated.updated_at };
      expect(events[1]!.data).toEqual(after);
      expect(events[1]!.created_at).toBe(updated.updated_at);
      expect(events[2]!.data).toEqual(after);
      // Unknown contacts change nothing and record nothing.
      expect((await call('PATCH', `/contacts/${id}`, { first_name: 'Again' })).status).toBe(404);
      expect((await call('DELETE', `/contacts/${id}`)).status).toBe(404);
      expect(await eventsOf('contact_id', id)).toHaveLength(3);
    });

    it('names the segments a contact is in, in the order it joined them, in each event; in contact.deleted those it was in', async () => {
      const [first, second] = [await addSegment(db()), await addSegment(db())];
      const { body } = await call('POST', '/contacts', { email: `member-${backend}@example.com`, segments: [first] });
      expect((await call('POST', `/contacts/${body.id}/segments/${second}`)).status).toBe(200);
      expect((await call('PATCH', `/contacts/${body.id}`, { first_name: 'Joined' })).status).toBe(200);
      expect((await call('DELETE', `/contacts/${body.id}`)).status).toBe(200);
      const events = await eventsOf('contact_id', body.id);
      expect(events.map((e) => [e.type, e.data.segment_ids])).toEqual([
        ['contact.created', [first]],
        ['contact.updated', [first, second]],
        ['contact.deleted', [first, second]],
      ]);
    });

    it('records contact.updated when a one-click unsubscribe takes a contact off everything, once however often it is posted', async () => {
      const { body } = await call('POST', '/contacts', { email: `click-${backend}@example.com` });
      const token = server.links.tokens.sign({ scope: 'broadcast', contactId: body.id, id: randomUUID() });
      const post = () => fetch(`${server.url}/unsubscribe/${token}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
      expect((await post()).status).toBe(200);
      expect((await post()).status).toBe(200);
      const events = await eventsOf('contact_id', body.id);
      expect(events.map((e) => e.type)).toEqual(['contact.created', 'contact.updated']);
      expect(events[1]!.data).toMatchObject({ id: body.id, unsubscribed: true });
      await call('DELETE', `/contacts/${body.id}`);
      expect((await post()).status).toBe(404);
    });
  });

  describe('webhook deliveries', () => {
    it('owes one delivery per event to each enabled webhook that asked for its type, and none to others', async () => {
      const at = new Date().toISOString();
      const webhook = (events: string[], status: 'enabled' | 'disabled') => ({ id: randomUUID(), endpoint: 'https://hooks.acme.dev/mailroom', events: JSON.stringify(events), signing_secret: `whsec_${'a'.repeat(32)}`, status, status_reason: null, created_at: at, updated_at: at });
      const wanted = webhook(['email.sent', 'email.delivered'], 'enabled');
      const contactsOnly = webhook(['contact.created'], 'enabled');
      const disabled = webhook(['email.sent', 'email.delivered'], 'disabled');
      await db().insertInto('webhooks').values([wanted, contactsOnly, disabled]).execute();
      try {
        const [id] = await send();
        await worker(captureTransport).runOnce();
        const events = await eventsOf('email_id', id!);
        expect(events).toHaveLength(2);
        const deliveries = await db().selectFrom('webhook_deliveries').selectAll().where('event_id', 'in', events.map((e) => e.id)).execute();
        expect(deliveries).toHaveLength(2);
        for (const delivery of deliveries) {
          expect(delivery).toMatchObject({ webhook_id: wanted.id, state: 'pending', attempts: 0, lease_token: null, last_status: null, next_attempt_at: events[0]!.created_at });
          expect(delivery.id).toMatch(/^msg_[A-Za-z0-9_-]{24}$/);
        }
        const created = await call('POST', '/contacts', { email: `hooked-${backend}@example.com` });
        const [contactEvent] = await eventsOf('contact_id', created.body.id);
        const contactDeliveries = await db().selectFrom('webhook_deliveries').select('webhook_id').where('event_id', '=', contactEvent!.id).execute();
        expect(contactDeliveries).toEqual([{ webhook_id: contactsOnly.id }]);
      } finally {
        await db().deleteFrom('webhooks').execute();
      }
    });
  });
});

describe.each(backends)('SMTP_FINAL in the server process on %s', (backend) => {
  it('makes the delivery thread record delivered with sent for a final relay', async () => {
    const sink = await startSmtpSink();
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-final-'));
    const schema = backend === 'postgres' ? await postgresSchema() : undefined;
    const server = await startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: schema?.url ?? '', SMTP_URL: sink.url, SMTP_FINAL: 'true' });
    try {
      const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
      const sent = await fetch(`${server.url}/emails`, { method: 'POST', headers, body: JSON.stringify({ from: 'a@acme.dev', to: 'final@example.com', subject: 'Final', text: 'x' }) });
      const { id } = await sent.json();
      await sink.waitFor(1);
      const types = async (): Promise<string[]> => (await (await fetch(`${server.url}/emails/${id}/events`, { headers })).json()).data.map((e: { type: string }) => e.type);
      await until(async () => (await types()).length >= 3, async () => `three events, not ${JSON.stringify(await types())}`);
      expect(await types()).toEqual(['email.queued', 'email.sent', 'email.delivered']);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      await sink.close();
      await schema?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
