// SIGKILL the server (build/main.js, fan-out in its delivery thread) while it writes a broadcast of
// 10,000 contacts to the outbox; after a restart the broadcast is taken over once its lease runs out,
// ends `sent`, and every eligible contact has exactly one email. On SQLite and PostgreSQL.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../server/store/index.ts';
import { backends, postgresSchema } from '../support/backends.ts';
import { startServerProcess, type ServerProcess } from '../support/process.ts';
import { addContacts, addSegment, outboxOf } from '../support/recipients.ts';
import { TEST_KEY } from '../support/server.ts';

const CONTACTS = 10_000;

describe.each(backends)('a crash mid-fan-out on %s', (backend) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-fanout-crash-'));
  let schema: Awaited<ReturnType<typeof postgresSchema>> | undefined;
  let store: Store;
  let env: Record<string, string>;
  const eligible = new Set<string>();
  let segment: string;

  beforeAll(async () => {
    schema = backend === 'postgres' ? await postgresSchema() : undefined;
    store = await openStore({ dataDir, databaseUrl: schema?.url });
    segment = await addSegment(store.database.db);
    const ids = await addContacts(store.database.db, Array.from({ length: CONTACTS }, (_, i) => ({ email: `crash-${i}@example.com`, unsubscribed: i % 10 === 0, segments: [segment] })));
    ids.forEach((id, i) => i % 10 !== 0 && eligible.add(id));
    // Small chunks and a short lease: the kill lands mid-way, and the restart takes over within a second.
    env = { DATA_DIR: dataDir, DATABASE_URL: schema?.url ?? '', FANOUT_CHUNK_SIZE: '100', FANOUT_LEASE_MS: '1000' };
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    await schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const written = async (id: string) =>
    Number((await store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('broadcast_id', '=', id).executeTakeFirstOrThrow()).n);
  const statusOf = async (id: string) => (await store.database.db.selectFrom('broadcasts').select(['status', 'sent_at']).where('id', '=', id).executeTakeFirstOrThrow());
  async function kill(server: ServerProcess) {
    server.child.kill('SIGKILL');
    await server.exited;
  }

  it('writes every eligible contact exactly once after a restart', async () => {
    const first = await startServerProcess(env);
    let id: string;
    let atKill: number;
    try {
      const res = await fetch(`${first.url}/broadcasts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ segment_id: segment, from: 'news@acme.dev', subject: 'Crash', text: 'Hi {{{FIRST_NAME|there}}}', send: true }),
      });
      expect(res.status).toBe(201);
      id = (await res.json()).id;
      // Some chunks in, so that the restart resumes from a position rather than the start.
      for (const deadline = Date.now() + 30_000; (await written(id)) < 1_000; ) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      await kill(first);
    }
    atKill = await written(id);
    console.log(`fan-out crash ${backend}: killed with ${atKill} of ${eligible.size} emails written`);
    expect(atKill).toBeGreaterThan(0);
    expect(atKill).toBeLessThan(eligible.size);
    expect((await statusOf(id)).status).toBe('queued');

    const restarted = performance.now();
    const second = await startServerProcess(env);
    try {
      for (const deadline = Date.now() + 60_000; (await statusOf(id)).status !== 'sent'; ) {
        expect(Date.now(), `still ${(await statusOf(id)).status} with ${await written(id)} written`).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      console.log(`fan-out crash ${backend}: sent ${Math.round(performance.now() - restarted)} ms after the restart began`);
    } finally {
      await kill(second);
    }
    const outbox = await outboxOf(store.database.db, id);
    expect(outbox.size).toBe(eligible.size);
    expect(new Set(outbox.keys())).toEqual(eligible);
    expect([...outbox.values()].every((n) => n === 1)).toBe(true);
    expect((await statusOf(id)).sent_at).toMatch(/Z$/);
  }, 120_000);
});
