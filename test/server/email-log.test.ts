// The email log on SQLite and PostgreSQL: GET /emails (newest first, a default page of 20, paged both
// ways) and GET /emails/{email_id}/events (an email's timeline, from its acceptance on).
import { randomUUID } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import { captureTransport } from '../../server/delivery/transport.ts';
import { queuedEventId } from '../../server/emails/timeline.ts';
import type { EmailRecord } from '../../server/store/emails.ts';
import { backends } from '../support/backends.ts';
import { withWorkers } from '../support/delivery.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';

const json = { 'content-type': 'application/json' };
const later = (ms: number) => new Date(Date.now() + ms);
const EMAIL_KEYS = ['bcc', 'cc', 'created_at', 'from', 'id', 'last_event', 'message_id', 'reply_to', 'scheduled_at', 'subject', 'to'];

describe.each(backends)('the email log on %s', (backend) => {
  const server = withServer(backend);
  const sink = withSink();
  const worker = withWorkers(server, sink, { idleMs: 10 });
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
  async function send(count = 1): Promise<string[]> {
    const items = Array.from({ length: count }, (_, n) => ({ from: 'Acme <news@acme.dev>', to: `reader${n}@example.com`, subject: `Hello ${n}`, text: 'x' }));
    const { status, body } = await call('POST', '/emails/batch', items);
    expect(status, JSON.stringify(body)).toBe(200);
    return body.data.map((d: { id: string }) => d.id);
  }
  /** The events stored for an email, oldest first. */
  const eventsOf = (emailId: string) => db().selectFrom('events').selectAll().where('email_id', '=', emailId).orderBy('created_at').orderBy('id').execute();

  describe('GET /emails', () => {
    let expected: string[];

    beforeAll(async () => {
      // In groups of four sharing one created_at, newer than anything the suite sends, so that the id
      // tiebreak is exercised on pages of their own.
      const base = Date.parse('2099-01-01T00:00:00.000Z');
      const rows: EmailRecord[] = Array.from({ length: 45 }, (_, i) => {
        const at = new Date(base + Math.floor(i / 4) * 1000).toISOString();
        return { id: randomUUID(), from_address: 'Acme <news@acme.dev>', to_addresses: JSON.stringify([`list${i}@example.com`]), cc: i % 5 === 0 ? JSON.stringify(['cc@example.com']) : null, bcc: null, reply_to: null, subject: `List ${i}`, html: '<p>body</p>', text: null, headers: null, tags: null, last_event: 'sent', attempts: 1, scheduled_at: null, next_attempt_at: at, message_id: null, last_error: null, created_at: at, updated_at: at, broadcast_id: null, contact_id: null };
      });
      await db().insertInto('emails').values(rows).execute();
      const all = await db().selectFrom('emails').select(['id', 'created_at']).execute();
      expected = all.sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1)).map((e) => e.id);
    });

    const page = async (query: string) => {
      const { status, body } = await call('GET', `/emails${query}`);
      expect(status, JSON.stringify(body)).toBe(200);
      return body as { object: string; has_more: boolean; data: Record<string, unknown>[] };
    };

    it('gives a page of 20 without limit, newest first, in the list shape without bodies', async () => {
      const body = await page('');
      expect(body.object).toBe('list');
      expect(body.has_more).toBe(true);
      expect(body.data.map((e) => e.id)).toEqual(expected.slice(0, 20));
      expect(Object.keys(body.data[0]!).sort()).toEqual(EMAIL_KEYS);
      expect(body.data.find((e) => e.subject === 'List 40')).toMatchObject({ to: ['list40@example.com'], cc: ['cc@example.com'], bcc: null, reply_to: null, scheduled_at: null, last_event: 'sent' });
    });

    it.each([1, 7, 100])('walks forward and back with limit %i, has_more exact on every page', async (limit) => {
      const forward: string[] = [];
      for (let after: string | undefined; ; ) {
        const body = await page(`?limit=${limit}${after ? `&after=${after}` : ''}`);
        expect(body.data.length).toBeLessThanOrEqual(limit);
        forward.push(...body.data.map((e) => e.id as string));
        expect(body.has_more).toBe(forward.length < expected.length);
        if (!body.has_more) break;
        after = forward.at(-1);
      }
      expect(forward).toEqual(expected);
      const backward: string[] = [];
      for (let before = expected.at(-1)!; ; ) {
        const body = await page(`?limit=${limit}&before=${before}`);
        backward.unshift(...body.data.map((e) => e.id as string));
        expect(body.has_more).toBe(backward.length < expected.length - 1);
        if (!body.has_more) break;
        before = backward[0]!;
      }
      expect(backward).toEqual(expected.slice(0, -1));
    });

    it('refuses a bad limit, both cursors, an unknown cursor and one that is no id, with 422', async () => {
      for (const query of ['?limit=0', '?limit=101', '?limit=ten', `?after=${expected[0]}&before=${expected[1]}`, `?after=${randomUUID()}`, '?before=not-an-id', `?after=${'a'.repeat(5000)}`, '?after=%00']) {
        const { status, body } = await call('GET', `/emails${query}`);
        expect(status, query).toBe(422);
        expect(body).toMatchObject({ statusCode: 422, name: expect.stringMatching(/^(validation_error|invalid_parameter)$/) });
      }
      expect((await call('GET', `/emails?after=${randomUUID()}`)).body.message).toBe('The `after` email does not exist.');
      // A contact's id names no email.
      const contact = (await call('POST', '/contacts', { email: `cursor-${backend}@example.com` })).body.id;
      expect((await call('GET', `/emails?before=${contact}`)).status).toBe(422);
    });

    it('is not open to a sending-only key', async () => {
      const { key } = await createKey(server.store, 'sender', 'sending_access');
      const res = await fetch(`${server.url}/emails`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(401);
      expect((await res.json()).name).toBe('restricted_api_key');
    });
  });

  it('gives message_id as null until the email is sent, then the Message-ID the relay received, in the email and in the list', async () => {
    const [id] = await send();
    expect((await call('GET', `/emails/${id}`)).body.message_id).toBeNull();
    const listed = async () => (await call('GET', '/emails?limit=100')).body.data.find((e: { id: string }) => e.id === id);
    expect((await listed()).message_id).toBeNull();
    const before = sink.received.length;
    await worker().runOnce();
    await sink.waitFor(before + 1);
    const relayed = sink.received.slice(before).find((r) => r.envelope.to.includes('reader0@example.com'))!;
    expect(relayed.mail.messageId).toMatch(/^<.+@.+>$/);
    expect((await call('GET', `/emails/${id}`)).body).toMatchObject({ last_event: 'sent', message_id: relayed.mail.messageId });
    expect((await listed()).message_id).toBe(relayed.mail.messageId);
  });

  describe('GET /emails/{email_id}/events', () => {
    it('begins with email.queued at the email’s created_at, then every event oldest first, with its data', async () => {
      let refusals = 0;
      sink.refuse = () => (refusals++ === 0 ? 421 : undefined);
      const [id] = await send();
      const w = worker();
      await w.runOnce();
      await w.runOnce(later(60_000));
      const email = (await call('GET', `/emails/${id}`)).body;
      const { status, body } = await call('GET', `/emails/${id}/events`);
      expect(status).toBe(200);
      const stored = await eventsOf(id!);
      expect(body).toEqual({
        object: 'list',
        has_more: false,
        data: [
          { object: 'event', id: queuedEventId(id!), type: 'email.queued', created_at: email.created_at, data: {} },
          { object: 'event', id: stored[0]!.id, type: 'email.delivery_delayed', created_at: stored[0]!.created_at, data: { reason: expect.stringMatching(/421 Try again later/) } },
          { object: 'event', id: stored[1]!.id, type: 'email.sent', created_at: stored[1]!.created_at, data: {} },
        ],
      });
      // The queued event's id is the same on every read, and differs from email to email.
      expect((await call('GET', `/emails/${id}/events`)).body.data[0].id).toBe(queuedEventId(id!));
      const [other] = await send();
      expect((await call('GET', `/emails/${other}/events`)).body.data).toEqual([{ object: 'event', id: queuedEventId(other!), type: 'email.queued', created_at: expect.any(String), data: {} }]);
      expect(queuedEventId(other!)).not.toBe(queuedEventId(id!));
    });

    it('keeps sent before delivered, recorded in the same instant', async () => {
      const ids = await send(20);
      await worker(captureTransport).runOnce();
      for (const id of ids) {
        const types = (await call('GET', `/emails/${id}/events`)).body.data.map((e: { type: string }) => e.type);
        expect(types).toEqual(['email.queued', 'email.sent', 'email.delivered']);
      }
    });

    it('answers 404 for an unknown email or the id of something else, 422 for what is no id', async () => {
      const contact = (await call('POST', '/contacts', { email: `timeline-${backend}@example.com` })).body.id;
      for (const id of [randomUUID(), contact]) expect(await call('GET', `/emails/${id}/events`)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Email not found' } });
      for (const id of ['steve@example.com', 'x'.repeat(5000), '%00', 'a%00b']) {
        const { status, body } = await call('GET', `/emails/${id}/events`);
        expect(status, id.slice(0, 20)).toBe(422);
        expect(body.statusCode).toBe(422);
      }
    });
  });
});
