// How many emails one claim takes. On PostgreSQL, `id IN (… LIMIT n FOR UPDATE SKIP LOCKED)` may run
// its subquery once per row it updates, each run skipping the rows the last one locked, and so claim
// more than `n` (the broadcast claim did, with a nested-loop plan): this holds the outbox's claim to n.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.each(backends)('one claim on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  it('takes at most the batch size, oldest due first, and the next claim takes the next ones', async () => {
    const at = Date.now() - 60_000;
    const rows = Array.from({ length: 500 }, (_, i) => {
      const when = new Date(at + i).toISOString();
      return {
        id: randomUUID(), from_address: 'a@acme.dev', to_addresses: '["b@example.com"]', cc: null, bcc: null, reply_to: null, subject: `n${i}`, html: null, text: 'x',
        headers: null, tags: null, last_event: 'queued' as const, attempts: 0, next_attempt_at: when, message_id: null, last_error: null, created_at: when, updated_at: when,
        broadcast_id: null, contact_id: null,
      };
    });
    await server.store.database.db.insertInto('emails').values(rows).execute();
    const first = await server.store.emails.claimNextBatch(100, new Date(), 60_000);
    expect(first.map((e) => e.subject).sort()).toEqual(rows.slice(0, 100).map((r) => r.subject).sort());
    const second = await server.store.emails.claimNextBatch(100, new Date(), 60_000);
    expect(second).toHaveLength(100);
    expect(second.some((e) => first.some((f) => f.id === e.id))).toBe(false);
  });
});
