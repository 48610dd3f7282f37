// How many emails one claim takes. On PostgreSQL, `id IN (… LIMIT n FOR UPDATE SKIP LOCKED)` may run
// its subquery once per row it updates, each run skipping the rows the last one locked, and so claim
// more than `n` (the broadcast claim did, with a nested-loop plan): this holds the outbox's claim to n.
// And a claim on a table that has just filled, before any ANALYZE, reads in the due index's order.
import { randomUUID } from 'node:crypto';
import { CompiledQuery, type Compilable } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inIndexOrder } from '../../server/store/database.ts';
import { emailEvent, emailRecord, recordEvents } from '../support/receiver.ts';
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

  it("takes each webhook's due deliveries apart, up to its own limit, oldest due first", async () => {
    const { store } = server;
    const at = new Date().toISOString();
    const webhooks = [randomUUID(), randomUUID()];
    for (const id of webhooks) {
      await store.webhooks.insert({ id, endpoint: `https://hooks.example/${id}`, events: '["email.sent"]', signing_secret: 'whsec_x', status: 'enabled', status_reason: null, created_at: at, updated_at: at });
    }
    const emails = Array.from({ length: 10 }, () => emailRecord());
    await recordEvents(store, emails.map((email) => emailEvent('email.sent', email)), emails);
    const claimed = await store.webhookDeliveries.claimDue(new Map([[webhooks[0]!, 3], [webhooks[1]!, 2]]), new Date(), 60_000);
    expect(claimed.filter((d) => d.webhook_id === webhooks[0])).toHaveLength(3);
    expect(claimed.filter((d) => d.webhook_id === webhooks[1])).toHaveLength(2);
    const next = await store.webhookDeliveries.claimDue(new Map([[webhooks[0]!, 100]]), new Date(), 60_000);
    expect(next).toHaveLength(7);
    expect(next.some((d) => claimed.some((c) => c.id === d.id))).toBe(false);
    await store.database.db.deleteFrom('webhook_deliveries').execute();
    await store.database.db.deleteFrom('webhooks').execute();
  });

  // Both claims' due queries, on tables filled just now: 5,000 queued emails, 5,000 pending webhook deliveries.
  it.runIf(backend === 'postgres')('reads the oldest due emails and webhook deliveries in index order, not every due one sorted, before the tables have statistics', async () => {
    const { store } = server;
    for (let i = 0; i < 5000; i += 1000) await store.database.db.insertInto('emails').values(queuedEmails(1000)).execute();
    const at = new Date().toISOString();
    const webhookId = randomUUID();
    await store.webhooks.insert({ id: webhookId, endpoint: 'https://hooks.example/in', events: '["email.sent"]', signing_secret: 'whsec_x', status: 'enabled', status_reason: null, created_at: at, updated_at: at });
    for (let i = 0; i < 5000; i += 1000) {
      const emails = Array.from({ length: 1000 }, () => emailRecord());
      await recordEvents(store, emails.map((email) => emailEvent('email.sent', email)), emails);
    }
    expect(await planOf(store.emails.dueEmails(100, new Date()) as unknown as Compilable)).toMatch(/Index Scan using emails_due/);
    expect(await planOf(store.webhookDeliveries.dueDeliveriesOf(new Map([[webhookId, 50], [randomUUID(), 50]]), new Date()))).toMatch(/Index Scan using webhook_deliveries_due_by_webhook/);
  });

  /** The plan of a query as a claim runs it; neither a bitmap nor a sort of every due row. */
  async function planOf(query: Compilable): Promise<string> {
    const { sql, parameters } = query.compile();
    const rows = await inIndexOrder(server.store.database.db, async (tx) => (await tx.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain ${sql}`, [...parameters]))).rows);
    const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).not.toMatch(/Bitmap|Sort/);
    return plan;
  }
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
