// The broadcast fan-out on SQLite and PostgreSQL, over a segment written straight into the tables: one
// outbox email per eligible contact and none for the others, whatever the topic's default; nobody
// twice when a chunk runs again, when a lease is taken over, when a worker stops or fails part way, or
// when two workers run at once; a scheduled broadcast not before its time.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_FANOUT, FanoutWorker } from '../../server/broadcasts/fanout.ts';
import { openStore } from '../../server/store/index.ts';
import { backends } from '../support/backends.ts';
import { addContacts, addSegment, addTopic, outboxOf } from '../support/recipients.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { eventually, takeTableAway } from './faults.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const quiet = pino({ level: 'silent' });

describe.each(backends)('the fan-out on %s', (backend) => {
  let server: TestServer;
  let segment: string;
  let optInTopic: string;
  let optOutTopic: string;
  const eligible = { none: new Set<string>(), optIn: new Set<string>(), optOut: new Set<string>() };
  const emailOf = new Map<string, string>();

  beforeAll(async () => {
    server = await startTestServer(backend);
    const db = server.store.database.db;
    segment = await addSegment(db, 'Members');
    const other = await addSegment(db, 'Others');
    optInTopic = await addTopic(db, 'opt_in');
    optOutTopic = await addTopic(db, 'opt_out');
    // 320 contacts: most in the segment, some only in the other one, some in both; every tenth
    // unsubscribed; choices for both topics cycling by index, none at all for many.
    const plan = Array.from({ length: 320 }, (_, i) => {
      const topics: Record<string, 'opt_in' | 'opt_out'> = {};
      if (i % 7 === 1) topics[optInTopic] = 'opt_out';
      if (i % 7 === 2) topics[optOutTopic] = 'opt_in';
      if (i % 7 === 3) topics[optInTopic] = 'opt_in';
      if (i % 7 === 4) topics[optOutTopic] = 'opt_out';
      const segments = i % 8 === 5 ? [other] : i % 8 === 6 ? [segment, other] : [segment];
      return { email: `Fan.${backend}.${i}@Example.com`, unsubscribed: i % 10 === 0, segments, topics };
    });
    const ids = await addContacts(db, plan);
    plan.forEach((p, i) => {
      const id = ids[i]!;
      emailOf.set(id, p.email);
      if (!p.segments.includes(segment) || p.unsubscribed) return;
      eligible.none.add(id);
      if (p.topics[optInTopic] !== 'opt_out') eligible.optIn.add(id);
      if (p.topics[optOutTopic] === 'opt_in') eligible.optOut.add(id);
    });
  });
  afterAll(() => server.close());

  async function sendBroadcast(fields: Record<string, unknown> = {}): Promise<string> {
    const res = await server.request('/broadcasts', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ segment_id: segment, from: 'Acme <news@acme.dev>', reply_to: ['help@acme.dev'], subject: 'Hi {{{FIRST_NAME|there}}}', html: '<p>{{{EMAIL}}}</p>', send: true, ...fields }),
    });
    expect(res.status).toBe(201);
    return (await res.json()).id;
  }
  const worker = (chunkSize = 37) => new FanoutWorker(server.store, quiet, { ...DEFAULT_FANOUT, chunkSize });
  async function drain(w = worker()) {
    while (await w.runOnce());
  }
  const statusOf = async (id: string) => server.store.database.db.selectFrom('broadcasts').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  it.each([
    ['no topic', 'none'],
    ['a topic whose default is opt_in', 'optIn'],
    ['a topic whose default is opt_out', 'optOut'],
  ] as const)('writes one email per eligible contact and none for the others, with %s', async (_, which) => {
    const topic_id = which === 'optIn' ? optInTopic : which === 'optOut' ? optOutTopic : undefined;
    const id = await sendBroadcast(topic_id ? { topic_id } : {});
    await drain();
    const outbox = await outboxOf(server.store.database.db, id);
    expect(new Set(outbox.keys())).toEqual(eligible[which]);
    expect([...outbox.values()].every((n) => n === 1)).toBe(true);
    expect(eligible[which].size).toBeGreaterThan(which === 'optOut' ? 20 : 200);

    const row = await statusOf(id);
    expect(row).toMatchObject({ status: 'sent', lease_token: null, lease_expires_at: null });
    const got = await (await server.request(`/broadcasts/${id}`)).json();
    expect(got).toMatchObject({ status: 'sent', sent_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
  });

  it('writes each email as the outbox holds it: the recipient and the broadcast, not the body', async () => {
    const id = await sendBroadcast();
    await drain();
    const emails = await server.store.database.db.selectFrom('emails').selectAll().where('broadcast_id', '=', id).execute();
    expect(new Set(emails.map((e) => e.id)).size).toBe(emails.length);
    for (const email of emails) {
      expect(email.id).toMatch(UUID);
      expect(email).toMatchObject({
        from_address: 'Acme <news@acme.dev>',
        to_addresses: JSON.stringify([emailOf.get(email.contact_id!)]),
        reply_to: JSON.stringify(['help@acme.dev']),
        subject: 'Hi {{{FIRST_NAME|there}}}',
        cc: null, bcc: null, html: null, text: null, headers: null, tags: null,
        last_event: 'queued', attempts: 0, message_id: null, last_error: null, lease_token: null,
      });
      expect(JSON.parse(email.to_addresses)).toEqual([emailOf.get(email.contact_id!)]);
      expect(email.created_at <= email.updated_at).toBe(true);
    }
    // Each email reads back through the API as a valid Email.
    const one = await server.request(`/emails/${emails[0]!.id}`);
    expect(one.status).toBe(200);
  });

  it('writes nobody twice when a chunk runs again from an earlier position, or the whole fan-out runs again', async () => {
    const db = server.store.database.db;
    const id = await sendBroadcast();
    const held = (await server.store.fanout.claim(new Date(), 60_000))!;
    expect(held.id).toBe(id);
    expect(await server.store.fanout.writeChunk(held, 50, new Date(), 60_000)).toBe('more');
    expect(await server.store.fanout.writeChunk(held, 50, new Date(), 60_000)).toBe('more');
    // As after a crash between the insert and the commit of an older version: the position falls back.
    await db.updateTable('broadcasts').set({ fanout_after: null }).where('id', '=', id).execute();
    for (let outcome = 'more'; outcome === 'more'; ) outcome = await server.store.fanout.writeChunk(held, 50, new Date(), 60_000);
    await db.updateTable('broadcasts').set({ status: 'queued', fanout_after: null, sent_at: null }).where('id', '=', id).execute();
    await drain();
    const outbox = await outboxOf(db, id);
    expect(new Set(outbox.keys())).toEqual(eligible.none);
    expect([...outbox.values()].every((n) => n === 1)).toBe(true);
  });

  it('claims one broadcast at a time, the oldest due first', async () => {
    const db = server.store.database.db;
    const ids = [await sendBroadcast(), await sendBroadcast(), await sendBroadcast()];
    const held = (await server.store.fanout.claim(new Date(), 60_000))!;
    expect(held.id).toBe(ids[0]);
    const leased = await db.selectFrom('broadcasts').select('id').where('lease_token', 'is not', null).execute();
    expect(leased.map((r) => r.id)).toEqual([ids[0]]);
    await server.store.fanout.release(held);
    await drain();
  });

  it('hands a broadcast over when its lease runs out: the old holder writes no more, the new one resumes', async () => {
    const db = server.store.database.db;
    const id = await sendBroadcast();
    const first = (await server.store.fanout.claim(new Date(), 60_000))!;
    expect(await server.store.fanout.writeChunk(first, 40, new Date(), 60_000)).toBe('more');
    expect(await server.store.fanout.claim(new Date(), 60_000)).toBeUndefined();
    await db.updateTable('broadcasts').set({ lease_expires_at: new Date(Date.now() - 1).toISOString() }).where('id', '=', id).execute();
    const second = (await server.store.fanout.claim(new Date(), 60_000))!;
    expect(second.id).toBe(id);
    expect(second.lease_token).not.toBe(first.lease_token);
    expect(await server.store.fanout.writeChunk(first, 40, new Date(), 60_000)).toBe('lost');
    for (let outcome = 'more'; outcome === 'more'; ) outcome = await server.store.fanout.writeChunk(second, 40, new Date(), 60_000);
    expect(await server.store.fanout.writeChunk(first, 40, new Date(), 60_000)).toBe('lost');
    const outbox = await outboxOf(db, id);
    expect(new Set(outbox.keys())).toEqual(eligible.none);
    expect([...outbox.values()].every((n) => n === 1)).toBe(true);
  });

  it('gives its broadcast back when stopped part way, and the next worker resumes it at once, writing nobody twice', async () => {
    const db = server.store.database.db;
    const id = await sendBroadcast();
    const stopping = worker(1);
    stopping.start();
    try {
      await eventually(async () => (await outboxOf(db, id)).size > 0, 'the first chunk written', 400, 5);
    } finally {
      await stopping.stop();
    }
    const row = await statusOf(id);
    expect(row).toMatchObject({ status: 'queued', lease_token: null });
    expect((await outboxOf(db, id)).size).toBeLessThan(eligible.none.size);
    // Not after its lease (a minute here) runs out: now.
    const next = await server.store.fanout.claim(new Date(), 60_000);
    expect(next?.id).toBe(id);
    await server.store.fanout.release(next!);
    await drain();
    const outbox = await outboxOf(db, id);
    expect(new Set(outbox.keys())).toEqual(eligible.none);
    expect([...outbox.values()].every((n) => n === 1)).toBe(true);
  });

  it('gives its broadcast back when a chunk fails, for the next round to resume it', async () => {
    const db = server.store.database.db;
    const id = await sendBroadcast();
    const bringBack = await takeTableAway(db, 'segment_contacts');
    try {
      await expect(worker().runOnce()).rejects.toThrow();
    } finally {
      await bringBack();
    }
    expect(await statusOf(id)).toMatchObject({ status: 'queued', lease_token: null });
    await drain();
    expect(new Set((await outboxOf(db, id)).keys())).toEqual(eligible.none);
    expect((await statusOf(id)).status).toBe('sent');
  });

  it('lets two workers run at once (on PostgreSQL each with its own connections): each broadcast fanned out once, nobody twice', async () => {
    const ids = [await sendBroadcast(), await sendBroadcast({ topic_id: optInTopic }), await sendBroadcast(), await sendBroadcast({ topic_id: optOutTopic })];
    // SQLite's writers are threads or processes of their own; two connections in one thread would
    // wait on each other's locks synchronously. There the two workers share the one connection.
    const other = backend === 'postgres' ? await openStore(server.config) : server.store;
    try {
      const a = new FanoutWorker(server.store, quiet, { ...DEFAULT_FANOUT, chunkSize: 13 });
      const b = new FanoutWorker(other, quiet, { ...DEFAULT_FANOUT, chunkSize: 17 });
      const run = async (w: FanoutWorker) => {
        let claimed = 0;
        while (await w.runOnce()) claimed++;
        return claimed;
      };
      const [byA, byB] = await Promise.all([run(a), run(b)]);
      expect(byA + byB).toBe(ids.length);
      if (backend === 'postgres') expect(Math.min(byA, byB)).toBeGreaterThan(0);
    } finally {
      if (other !== server.store) await other.close();
    }
    const expected = [eligible.none, eligible.optIn, eligible.none, eligible.optOut];
    for (const [i, id] of ids.entries()) {
      const outbox = await outboxOf(server.store.database.db, id);
      expect(new Set(outbox.keys())).toEqual(expected[i]);
      expect([...outbox.values()].every((n) => n === 1)).toBe(true);
      expect((await statusOf(id)).status).toBe('sent');
    }
  });

  it('sends a scheduled broadcast at its time, not before', async () => {
    const at = new Date(Date.now() + 2500);
    const id = await sendBroadcast({ scheduled_at: at.toISOString() });
    expect((await statusOf(id)).status).toBe('scheduled');
    const running = new FanoutWorker(server.store, quiet, { ...DEFAULT_FANOUT, idleMs: 50 });
    running.start();
    try {
      for (const deadline = Date.now() + 20_000; (await statusOf(id)).status !== 'sent'; ) {
        const observed = Date.now();
        const written = (await outboxOf(server.store.database.db, id)).size;
        if (observed < at.getTime()) expect(written).toBe(0);
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await running.stop();
    }
    const first = await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.min('created_at').as('first')).where('broadcast_id', '=', id).executeTakeFirstOrThrow();
    expect(String(first.first) >= at.toISOString()).toBe(true);
    expect((await statusOf(id)).scheduled_at).toBe(at.toISOString());
    expect(new Set((await outboxOf(server.store.database.db, id)).keys())).toEqual(eligible.none);
  });
});
