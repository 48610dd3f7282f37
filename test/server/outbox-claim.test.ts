// How many emails one claim takes. On PostgreSQL, `id IN (… LIMIT n FOR UPDATE SKIP LOCKED)` may run
// its subquery once per row it updates, each run skipping the rows the last one locked, and so claim
// more than `n` (the broadcast claim did, with a nested-loop plan): this holds the outbox's claim to n.
// And a claim on a table that has just filled, before any ANALYZE, reads in the due index's order.
import { randomUUID } from 'node:crypto';
import { CompiledQuery, type Compilable } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inIndexOrder } from '../../server/store/database.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.each(backends)('one claim on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  it('takes at most the batch size, oldest due first, and the next claim takes the next ones', async () => {
    const rows = queuedEmails(500);
    await server.store.database.db.insertInto('emails').values(rows).execute();
    const first = await server.store.emails.claimNextBatch(100, new Date(), 60_000);
    expect(first.map((e) => e.subject).sort()).toEqual(rows.slice(0, 100).map((r) => r.subject).sort());
    const second = await server.store.emails.claimNextBatch(100, new Date(), 60_000);
    expect(second).toHaveLength(100);
    expect(second.some((e) => first.some((f) => f.id === e.id))).toBe(false);
  });

  it.runIf(backend === 'postgres')('reads the oldest due emails in index order, not every due one sorted, before the table has statistics', async () => {
    const db = server.store.database.db;
    for (let i = 0; i < 5000; i += 1000) await db.insertInto('emails').values(queuedEmails(1000)).execute();
    const due = (server.store.emails.dueEmails(100, new Date()) as unknown as Compilable).compile();
    const plan = await inIndexOrder(db, async (tx) => (await tx.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain ${due.sql}`, [...due.parameters]))).rows);
    const text = plan.map((row) => row['QUERY PLAN']).join('\n');
    expect(text).toMatch(/Index Scan using emails_due/);
    expect(text).not.toMatch(/Bitmap|Sort/);
  });
});

function queuedEmails(count: number) {
  const at = Date.now() - 60_000;
  return Array.from({ length: count }, (_, i) => {
    const when = new Date(at + i).toISOString();
    return {
      id: randomUUID(), from_address: 'a@acme.dev', to_addresses: '["b@example.com"]', cc: null, bcc: null, reply_to: null, subject: `n${i}`, html: null, text: 'x',
      headers: null, tags: null, last_event: 'queued' as const, attempts: 0, next_attempt_at: when, message_id: null, last_error: null, created_at: when, updated_at: when,
      broadcast_id: null, contact_id: null,
    };
  });
}
