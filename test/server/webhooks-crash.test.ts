// SIGKILL the server (build/main.js, the webhook outbox in its delivery thread) while it posts 1,000
// events to a slow receiver; after a restart, the deliveries it held come due when their leases run
// out, and every event reaches the receiver at least once. Duplicates (the same svix-id twice) are
// what at-least-once costs: the posts in flight at the kill, and those answered but not yet recorded.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../server/store/index.ts';
import { backends, postgresSchema } from '../support/backends.ts';
import { startServerProcess, type ServerProcess } from '../support/process.ts';
import { emailEvent, emailRecord, recordEvents, startReceiver, until, type Receiver } from '../support/receiver.ts';
import { TEST_KEY } from '../support/server.ts';

const EVENTS = 1_000;

describe.each(backends)('a crash mid-delivery of webhooks on %s', (backend) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-webhooks-crash-'));
  let schema: Awaited<ReturnType<typeof postgresSchema>> | undefined;
  let store: Store;
  let receiver: Receiver;
  let env: Record<string, string>;

  beforeAll(async () => {
    schema = backend === 'postgres' ? await postgresSchema() : undefined;
    store = await openStore({ dataDir, databaseUrl: schema?.url });
    // Slow: 20 ms an answer, so that the kill finds posts in flight.
    receiver = await startReceiver(async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return 200;
    });
    // A short lease, so that the restart takes over the deliveries the killed process held within seconds.
    env = { DATA_DIR: dataDir, DATABASE_URL: schema?.url ?? '', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_CONCURRENCY: '16', WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_LEASE_MS: '2000' };
  }, 60_000);
  afterAll(async () => {
    await receiver?.close();
    await store?.close();
    await schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  async function kill(server: ServerProcess) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
  const states = async () => {
    const rows = await store.database.db.selectFrom('webhook_deliveries').select('state').execute();
    return rows.reduce<Record<string, number>>((n, r) => ((n[r.state] = (n[r.state] ?? 0) + 1), n), {});
  };

  it('delivers every event at least once after a restart, and counts the duplicates', async () => {
    const first = await startServerProcess(env);
    let ids: Set<string>;
    try {
      const res = await fetch(`${first.url}/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ endpoint: receiver.url, events: ['email.sent'] }),
      });
      expect(res.status).toBe(201);
      // Already sent: queued, the server's own delivery worker would send them and owe the webhook more events.
      const emails = Array.from({ length: EVENTS }, () => emailRecord({ last_event: 'sent' }));
      await recordEvents(store, emails.map((e) => emailEvent('email.sent', e)), emails);
      ids = new Set((await store.database.db.selectFrom('webhook_deliveries').select('id').execute()).map((d) => d.id));
      expect(ids.size).toBe(EVENTS);
      await until(() => receiver.received.length >= 200, 'some deliveries received before the kill', 30_000);
    } finally {
      await kill(first);
    }
    const atKill = receiver.received.length;
    const before = await states();
    console.log(`webhooks crash ${backend}: killed with ${atKill} posts received, outbox ${JSON.stringify(before)}`);
    expect(before.pending).toBeGreaterThan(0);

    const second = await startServerProcess(env);
    try {
      await until(async () => (await states()).delivered === EVENTS, async () => `outbox ${JSON.stringify(await states())}`, 60_000);
    } finally {
      await kill(second);
    }
    const received = receiver.ids();
    const duplicates = receiver.received.length - received.size;
    console.log(`webhooks crash ${backend}: ${received.size} of ${EVENTS} events received, ${duplicates} duplicates (the same svix-id twice) among ${receiver.received.length} posts`);
    expect(received).toEqual(ids);
    expect(duplicates).toBeLessThanOrEqual(64);
  }, 120_000);
});
