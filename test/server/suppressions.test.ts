// The suppression list over HTTP (add, add in bulk, list by origin and by page, retrieve and delete by
// id or by address in any case, remove in bulk, 404 and 422), and what it does: a suppressed recipient
// is never sent to (a real SMTP server on 127.0.0.1 receives nothing for it), an email left with nobody
// ends `suppressed` with its event, and the broadcast fan-out skips a suppressed contact.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_FANOUT, FanoutWorker } from '../../server/broadcasts/fanout.ts';
import { smtpTransport } from '../../server/delivery/transport.ts';
import { DEFAULT_DELIVERY, DeliveryWorker } from '../../server/delivery/worker.ts';
import { backends } from '../support/backends.ts';
import { addContacts, addSegment, outboxOf } from '../support/recipients.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { startSmtpSink, type SmtpSink } from '../support/smtp.ts';

const quiet = pino({ level: 'silent' });
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe.each(backends)('suppressions on %s', (backend) => {
  let server: TestServer;
  let sink: SmtpSink;
  beforeAll(async () => {
    server = await startTestServer(backend);
    sink = await startSmtpSink();
  });
  afterAll(async () => {
    await sink.close();
    await server.close();
  });

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await server.request(path, { method, ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  }
  const add = (email: string) => call('POST', '/suppressions', { email });

  it('adds an address once: 201 with an id, then 200 with the same id in any letter case', async () => {
    const first = await add('Steve@Example.com');
    expect(first).toEqual({ status: 201, body: { object: 'suppression', id: expect.stringMatching(UUID) } });
    const again = await add('steve@EXAMPLE.com');
    expect(again).toEqual({ status: 200, body: { object: 'suppression', id: first.body.id } });
    const got = await call('GET', `/suppressions/${first.body.id}`);
    expect(got).toEqual({ status: 200, body: { object: 'suppression', id: first.body.id, email: 'Steve@Example.com', origin: 'manual', source_id: null, created_at: expect.any(String) } });
    expect((await call('GET', '/suppressions/STEVE@example.COM')).body.id).toBe(first.body.id);
    expect((await call('GET', `/suppressions/${encodeURIComponent('steve@example.com')}`)).body.id).toBe(first.body.id);
  });

  it('deletes by address or by id, then answers 404', async () => {
    const byAddress = (await add('gone.one@example.com')).body.id;
    const byId = (await add('gone.two@example.com')).body.id;
    expect(await call('DELETE', '/suppressions/GONE.ONE@example.com')).toEqual({ status: 200, body: { object: 'suppression', id: byAddress, deleted: true } });
    expect(await call('DELETE', `/suppressions/${byId}`)).toEqual({ status: 200, body: { object: 'suppression', id: byId, deleted: true } });
    for (const path of ['/suppressions/gone.one@example.com', `/suppressions/${byId}`]) {
      expect(await call('GET', path)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Suppression not found' } });
      expect((await call('DELETE', path)).status).toBe(404);
    }
    // Free again: adding it back is a new suppression.
    expect((await add('gone.one@example.com')).status).toBe(201);
  });

  it('refuses what is neither an id nor an address, and bodies that break the contract, with 422', async () => {
    const invalid = await call('GET', '/suppressions/not-an-id');
    expect(invalid).toMatchObject({ status: 422, body: { name: 'invalid_parameter' } });
    expect(invalid.body.message).toContain('`suppression`');
    expect((await call('DELETE', `/suppressions/${'x'.repeat(5000)}`)).status).toBe(422);
    expect((await call('GET', '/suppressions/a%00b@example.com')).status).toBe(422);
    expect(await add('not an address')).toMatchObject({ status: 422, body: { name: 'validation_error' } });
    expect(await add(`${'a'.repeat(250)}@example.com`)).toMatchObject({ status: 422 });
    expect(await call('POST', '/suppressions', {})).toMatchObject({ status: 422, body: { name: 'missing_required_field' } });
    expect(await call('POST', '/suppressions', { email: 'a@example.com', origin: 'bounce' })).toMatchObject({ status: 422, body: { name: 'validation_error' } });
    expect((await call('POST', '/suppressions/batch/add', { emails: [] })).status).toBe(422);
    expect((await call('POST', '/suppressions/batch/add', { emails: Array.from({ length: 101 }, (_, i) => `m${i}@example.com`) })).status).toBe(422);
    expect(await call('POST', '/suppressions/batch/remove', { emails: ['a@example.com'], ids: [crypto.randomUUID()] })).toEqual({
      status: 422,
      body: { statusCode: 422, name: 'validation_error', message: 'Give `emails` or `ids`, not both.' },
    });
    expect(await call('POST', '/suppressions/batch/remove', {})).toEqual({ status: 422, body: { statusCode: 422, name: 'missing_required_field', message: 'Missing `emails` or `ids` field.' } });
    expect((await call('POST', '/suppressions/batch/remove', { ids: ['a@example.com'] })).status).toBe(422);
    expect((await call('GET', '/suppressions?origin=spam')).status).toBe(422);
    expect((await call('GET', `/suppressions?limit=2&after=${crypto.randomUUID()}`)).status).toBe(422);
  });

  it('adds and removes in bulk, in the order given, existing ones keeping their ids', async () => {
    const existing = (await add('bulk.0@example.com')).body.id;
    const added = await call('POST', '/suppressions/batch/add', { emails: ['bulk.0@example.com', 'Bulk.1@example.com', 'bulk.2@example.com', 'BULK.1@example.com'] });
    expect(added.status).toBe(201);
    const ids = added.body.data.map((d: { id: string }) => d.id);
    expect(added.body.data.every((d: { object: string }) => d.object === 'suppression')).toBe(true);
    expect(ids[0]).toBe(existing);
    expect(ids[3]).toBe(ids[1]);
    expect(new Set(ids).size).toBe(3);
    const byEmail = await call('POST', '/suppressions/batch/remove', { emails: ['bulk.2@EXAMPLE.com', 'never@example.com'] });
    expect(byEmail).toEqual({ status: 200, body: { data: [{ object: 'suppression', id: ids[2], deleted: true }] } });
    const byId = await call('POST', '/suppressions/batch/remove', { ids: [ids[1], ids[0], crypto.randomUUID()] });
    expect(byId).toEqual({ status: 200, body: { data: [{ object: 'suppression', id: ids[1], deleted: true }, { object: 'suppression', id: ids[0], deleted: true }] } });
    expect((await call('GET', `/suppressions/${ids[0]}`)).status).toBe(404);
  });

  it('keeps one suppression per address under concurrent adds', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => add(i % 2 ? 'race@example.com' : 'RACE@example.com')));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
  });

  it('lists newest first, by origin, in pages with cursors, or all at once', async () => {
    const db = server.store.database.db;
    const at = (s: number) => new Date(Date.parse('2030-01-01T00:00:00.000Z') + s * 1000).toISOString();
    // Newer than anything the other tests add, so that they head the list.
    const rows = ['bounce', 'complaint', 'bounce', 'manual', 'bounce'].map((origin, i) => ({
      id: crypto.randomUUID(),
      email: `listed.${i}@example.com`,
      email_key: `listed.${i}@example.com`,
      origin: origin as 'bounce' | 'complaint' | 'manual',
      source_id: origin === 'manual' ? null : crypto.randomUUID(),
      created_at: at(i),
    }));
    await db.insertInto('suppressions').values(rows).execute();
    const newest = [...rows].reverse();
    const all = await call('GET', '/suppressions');
    expect(all.body).toMatchObject({ object: 'list', has_more: false });
    expect(all.body.data.slice(0, 5).map((s: { id: string }) => s.id)).toEqual(newest.map((r) => r.id));
    expect(all.body.data[0]).toEqual({ object: 'suppression', id: rows[4]!.id, email: 'listed.4@example.com', origin: 'bounce', source_id: rows[4]!.source_id, created_at: rows[4]!.created_at });

    const bounces = newest.filter((r) => r.origin === 'bounce').map((r) => r.id);
    const first = await call('GET', '/suppressions?origin=bounce&limit=2');
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((s: { id: string }) => s.id)).toEqual(bounces.slice(0, 2));
    const second = await call('GET', `/suppressions?origin=bounce&limit=2&after=${bounces[1]}`);
    expect(second.body).toEqual({ object: 'list', has_more: false, data: [expect.objectContaining({ id: bounces[2], origin: 'bounce' })] });
    const back = await call('GET', `/suppressions?origin=bounce&limit=1&before=${bounces[2]}`);
    expect(back.body).toMatchObject({ has_more: true, data: [{ id: bounces[1] }] });
    const complaints = await call('GET', '/suppressions?origin=complaint');
    expect(complaints.body.data.map((s: { id: string }) => s.id)).toEqual([rows[1]!.id]);
  });

  it('never sends to a suppressed recipient: an email to nobody else ends suppressed, with its event', async () => {
    await add('Blocked@Example.com');
    const res = await call('POST', '/emails', { from: 'Acme <team@acme.dev>', to: 'blocked@example.com', subject: 'Hello', text: 'Hi' });
    expect(res.status).toBe(200);
    const before = sink.received.length;
    const worker = new DeliveryWorker(server.store, smtpTransport(sink.url), quiet, { ...DEFAULT_DELIVERY, idleMs: 10 });
    try {
      expect(await worker.runOnce()).toBe(1);
    } finally {
      await worker.stop();
    }
    expect(sink.received.length).toBe(before);
    expect((await call('GET', `/emails/${res.body.id}`)).body.last_event).toBe('suppressed');
    const events = await server.store.events.forEmail(res.body.id);
    expect(events.map((e) => e.type)).toEqual(['email.suppressed']);
    expect(JSON.parse(events[0]!.data!)).toEqual({
      suppressed: { type: 'OnAccountSuppressionList', reason: 'manual', message: expect.stringContaining('blocked@example.com'), diagnosticCode: [] },
    });
  });

  it('sends to the recipients left: one of two suppressed, in to or in cc and bcc', async () => {
    await add('skip.me@example.com');
    const res = await call('POST', '/emails/batch', [
      { from: 'Acme <team@acme.dev>', to: ['Skip <SKIP.me@example.com>', 'Keep <keep.me@example.com>'], subject: 'Two', text: 'Hi' },
      { from: 'Acme <team@acme.dev>', to: 'keep.too@example.com', cc: 'skip.me@example.com', bcc: 'Skip.Me@example.com', subject: 'Copies', text: 'Hi' },
    ]);
    const [two, copies] = res.body.data.map((d: { id: string }) => d.id);
    const before = sink.received.length;
    const worker = new DeliveryWorker(server.store, smtpTransport(sink.url), quiet, { ...DEFAULT_DELIVERY, idleMs: 10 });
    try {
      expect(await worker.runOnce()).toBe(2);
    } finally {
      await worker.stop();
    }
    await sink.waitFor(before + 2);
    const got = (id: string) => sink.received.find((r) => r.mail.messageId === `<${id}@acme.dev>`)!;
    expect(got(two).envelope.to).toEqual(['keep.me@example.com']);
    expect(got(two).mail.to).toMatchObject({ value: [{ address: 'keep.me@example.com' }] });
    expect(got(two).raw).not.toMatch(/skip\.me/i);
    expect(got(copies).envelope.to).toEqual(['keep.too@example.com']);
    expect(got(copies).mail.cc).toBeUndefined();
    expect(got(copies).raw).not.toMatch(/skip\.me/i);
    for (const id of [two, copies]) expect((await call('GET', `/emails/${id}`)).body.last_event).not.toBe('suppressed');
  });

  it('leaves a suppressed contact out of a broadcast fan-out', async () => {
    const db = server.store.database.db;
    const segment = await addSegment(db, 'Readers');
    const [kept, suppressed] = await addContacts(db, [
      { email: `reader.${backend}@example.com`, segments: [segment] },
      { email: `Bounced.Reader.${backend}@Example.com`, segments: [segment] },
    ]);
    await add(`bounced.reader.${backend}@example.com`);
    const created = await call('POST', '/broadcasts', { segment_id: segment, from: 'Acme <news@acme.dev>', subject: 'News', html: '<p>Hi</p>', send: true });
    expect(created.status).toBe(201);
    const fanout = new FanoutWorker(server.store, quiet, DEFAULT_FANOUT);
    while (await fanout.runOnce());
    const outbox = await outboxOf(db, created.body.id);
    expect([...outbox.keys()]).toEqual([kept]);
    expect(outbox.has(suppressed!)).toBe(false);
  });
});
