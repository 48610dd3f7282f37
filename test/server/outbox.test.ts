// The outbox under faults: messages that cannot be built, attempts used up by workers that never
// recorded an outcome, a group commit that fails, outcomes recorded late by a worker whose lease ran
// out, and processes racing to seed the same API key.
import { tmpdir } from 'node:os';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureKey, hashKey } from '../../server/apiKeys/key.ts';
import { captureTransport, smtpTransport } from '../../server/delivery/transport.ts';
import { DEFAULT_DELIVERY, DeliveryWorker, type DeliveryOptions } from '../../server/delivery/worker.ts';
import { openStore, type Store } from '../../server/store/index.ts';
import { backends, postgresSchema, type Backend } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { startSmtpSink, type SmtpSink } from '../support/smtp.ts';
import { sleep, takeTableAway } from './faults.ts';

const quiet = pino({ level: 'silent' });
const fast: DeliveryOptions = { ...DEFAULT_DELIVERY, idleMs: 10, retryBaseMs: 10, maxAttempts: 3 };
const json = { 'content-type': 'application/json' };
const later = (ms: number) => new Date(Date.now() + ms);

async function send(server: TestServer, items: object[]): Promise<string[]> {
  const res = await server.request('/emails/batch', { method: 'POST', headers: json, body: JSON.stringify(items) });
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()).data as { id: string }[]).map((d) => d.id);
}

/** Unhandled rejections raised while `run` goes on, and a little after. */
async function unhandledRejections(run: () => Promise<unknown>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => seen.push(reason);
  process.on('unhandledRejection', listener);
  try {
    await run().catch(() => {});
    await sleep(50);
  } finally {
    process.off('unhandledRejection', listener);
  }
  return seen;
}

describe.each(backends)('the outbox on %s', (backend: Backend) => {
  let server: TestServer;
  let sink: SmtpSink;
  const workers: DeliveryWorker[] = [];
  const worker = (options = fast) => {
    const w = new DeliveryWorker(server.store, smtpTransport(sink.url), quiet, options);
    workers.push(w);
    return w;
  };
  beforeAll(async () => {
    server = await startTestServer(backend);
    sink = await startSmtpSink();
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await sink.close();
    await server.close();
  });
  const received = (id: string) => sink.received.filter((r) => r.mail.messageId?.startsWith(`<${id}@`)).length;

  describe('messages that cannot be prepared', () => {
    it('fails an email whose plain text cannot be generated, at once and with the reason, instead of retrying it forever', async () => {
      const html = '<b>'.repeat(20_000) + 'deep' + '</b>'.repeat(20_000);
      const [deep, fine] = await send(server, [
        { from: 'a@acme.dev', to: 'deep@example.com', subject: 'Deep', html },
        { from: 'a@acme.dev', to: 'fine@example.com', subject: 'Fine', text: 'x' },
      ]);
      expect(await worker().runOnce()).toBe(2);
      const stored = await server.store.emails.find(deep!);
      expect(stored).toMatchObject({ last_event: 'failed', attempts: 1 });
      expect(stored?.last_error).toMatch(/could not be built.*call stack/i);
      expect(received(deep!)).toBe(0);
      // The other email of the round is not held up by it.
      await sink.waitFor(1);
      expect((await server.store.emails.find(fine!))?.last_event).toBe('sent');
      expect(await worker().runOnce(later(10 * 60_000))).toBe(0);
    });

    it('fails an email whose attempts were used up by workers that died before recording an outcome', async () => {
      const [id] = await send(server, [{ from: 'a@acme.dev', to: 'poison@example.com', subject: 'Poison', text: 'x' }]);
      // Each of these claims is a worker that took the email and died with it (the lease runs out).
      for (let n = 0; n < fast.maxAttempts; n++) await server.store.emails.claimNextBatch(100, later(n * 2000), 1000);
      expect(await worker().runOnce(later(fast.maxAttempts * 2000))).toBe(1);
      const stored = await server.store.emails.find(id!);
      expect(stored).toMatchObject({ last_event: 'failed', attempts: fast.maxAttempts + 1 });
      expect(stored?.last_error).toMatch(/attempts/);
      expect(received(id!)).toBe(0);
    });
  });

  describe('a group commit that fails', () => {
    it('fails the round, without an unhandled rejection, and the emails are delivered once the store is back', async () => {
      const [id] = await send(server, [{ from: 'a@acme.dev', to: 'commit@example.com', subject: 'Commit', text: 'x' }]);
      const capturing = new DeliveryWorker(server.store, captureTransport(), quiet, { ...fast, leaseMs: 1000 });
      workers.push(capturing);
      const bringBack = await takeTableAway(server.store.database.db, 'captured_messages');
      let round: unknown;
      try {
        const seen = await unhandledRejections(async () => {
          round = await capturing.runOnce().catch((error) => error);
        });
        expect(seen).toEqual([]);
        expect(round).toBeInstanceOf(Error);
      } finally {
        await bringBack();
      }
      expect((await server.store.emails.find(id!))?.last_event).toBe('queued');
      expect(await capturing.runOnce(later(2000))).toBe(1);
      expect((await server.store.emails.find(id!))?.last_event).toBe('delivered');
    });
  });

  describe('a read that fails after the claim', () => {
    it('is tried again while the claim lasts, and the batch goes out in the same round instead of waiting out its lease', async () => {
      const [id] = await send(server, [{ from: 'a@acme.dev', to: 'read@example.com', subject: 'Read', text: 'x' }]);
      const capturing = new DeliveryWorker(server.store, captureTransport(), quiet, { ...fast, leaseMs: 60_000 });
      workers.push(capturing);
      // The suppression list, read after the claim, is away for 300 ms.
      const bringBack = await takeTableAway(server.store.database.db, 'suppressions');
      const back = sleep(300).then(bringBack);
      try {
        expect(await capturing.runOnce()).toBeGreaterThanOrEqual(1);
      } finally {
        await back;
      }
      expect((await server.store.emails.find(id!))?.last_event).toBe('delivered');
    });
  });

  describe('only the lease holder records an outcome', () => {
    beforeEach(async () => {
      // Nothing else due: the claims below take exactly the email each test sends.
      await server.store.database.db.updateTable('emails').set({ last_event: 'failed' }).where('last_event', 'in', ['queued', 'delivery_delayed']).execute();
    });

    it('ignores a late outcome from a worker whose lease ran out, and never overwrites sent', async () => {
      const [id] = await send(server, [{ from: 'a@acme.dev', to: 'lease@example.com', subject: 'Lease', text: 'x' }]);
      const emails = server.store.emails;
      const [first] = await emails.claimNextBatch(10, new Date(), 1000);
      const [second] = await emails.claimNextBatch(10, later(2000), 60_000);
      expect(first?.id).toBe(id);
      expect(second?.id).toBe(id);

      // The first worker's lease is over: what it says now changes nothing.
      expect(await emails.markFailed(first!, 'late failure', new Date())).toBe(false);
      expect(await emails.markDelayed(first!, 'late delay', later(1000), new Date())).toBe(false);
      expect((await emails.find(id!))?.last_event).toBe('queued');

      expect(await emails.markDelivered([{ ...second!, messageId: `<${id}@acme.dev>`, text: 'x' }], new Date(), false)).toEqual([id]);
      expect(await emails.markFailed(first!, 'late failure', new Date())).toBe(false);
      expect(await emails.markFailed(second!, 'after the fact', new Date())).toBe(false);
      expect(await emails.markDelivered([{ ...first!, messageId: `<${id}@acme.dev>`, text: 'x' }], new Date(), true)).toEqual([]);
      expect(await emails.find(id!)).toMatchObject({ last_event: 'sent', last_error: null });
      // The sent email is not claimed again: a relay's acceptance ends the outbox's part.
      expect(await emails.claimNextBatch(10, later(10 * 60_000), 1000)).toEqual([]);
    });

    it('does not let a failed email be failed again or revived', async () => {
      const [id] = await send(server, [{ from: 'a@acme.dev', to: 'final@example.com', subject: 'Final', text: 'x' }]);
      const emails = server.store.emails;
      const [claim] = await emails.claimNextBatch(10, new Date(), 60_000);
      expect(await emails.markFailed(claim!, 'refused', new Date())).toBe(true);
      expect(await emails.markDelayed(claim!, 'later', later(1000), new Date())).toBe(false);
      expect(await emails.markDelivered([{ ...claim!, messageId: `<${id}@acme.dev>`, text: 'x' }], new Date(), false)).toEqual([]);
      expect(await emails.find(id!)).toMatchObject({ last_event: 'failed', last_error: 'refused' });
    });
  });
});

describe.each(backends)('processes starting together on one empty %s database', (backend: Backend) => {
  let stores: Store[] = [];
  let drop = async () => {};
  afterEach(async () => {
    for (const store of stores) await store.close();
    stores = [];
    await drop();
  });

  it('seed MAILROOM_API_KEY once, none of them failing', async () => {
    const schema = backend === 'postgres' ? await postgresSchema() : undefined;
    if (schema) drop = schema.drop;
    const dataDir = `${tmpdir()}/mailroom-seed-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    // Migrated once first: the race here is the key's, not the migrations'.
    stores.push(await openStore({ databaseUrl: schema?.url, dataDir }));
    for (let n = 0; n < 5; n++) stores.push(await openStore({ databaseUrl: schema?.url, dataDir }));
    const seed = 're_seed000000000000000000000000000000';
    const results = await Promise.allSettled(stores.map((store) => ensureKey(store, seed)));
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    const keys = await stores[0]!.apiKeys.list();
    expect(keys).toHaveLength(1);
    expect(keys[0]?.key_hash).toBe(hashKey(seed));
  });
});
