// The lease rules of the outbox tables (emails, webhook deliveries, broadcasts being fanned out), which
// the runner (server/outbox/runner.ts) works. A claim writes a token of its own and when its lease
// ends; a row is the claim's while its token is there and the row is still open (no outcome yet), so
// that a worker whose lease ran out, or a late answer, can neither record an outcome nor undo
// another's. A worker that dies leaves its rows to come due again when the lease ends (at least once).
// A holder may extend its lease, or give a row back, due again at once. Each table says where its
// lease's end is written and which rows are open; which rows a claim takes is the table's own query.
import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { Tables } from './database.ts';

export interface LeaseRules {
  table: 'emails' | 'webhook_deliveries' | 'broadcasts';
  /** Where the lease's end is written: for emails and webhook deliveries, when they come due again. */
  endsAt: 'next_attempt_at' | 'lease_expires_at';
  /** The rows a lease can still hold: those without an outcome. */
  open: RawBuilder<SqlBool>;
}

/** A claimed row: its id and the token of the claim that holds it. */
export interface Lease {
  id: string;
  lease_token: string;
}

/** A new claim: its token, and when its lease ends. */
export function newLease(now: Date, leaseMs: number): { lease_token: string; ends: string } {
  return { lease_token: randomUUID(), ends: new Date(now.getTime() + leaseMs).toISOString() };
}

/** The rows, of `ids` (one or several), that the claim `leaseToken` holds while they are open. */
export function heldBy(rules: LeaseRules, ids: string | string[], leaseToken: string): RawBuilder<SqlBool> {
  const id = typeof ids === 'string' ? sql`id = ${ids}` : sql`id in (${sql.join(ids)})`;
  return sql<SqlBool>`(${id} and lease_token = ${leaseToken} and ${rules.open})`;
}

/** Extends until `until` the claim `leaseToken` holds on those of `ids` still open. */
export async function extendLeases(db: Kysely<Tables>, rules: LeaseRules, ids: string[], leaseToken: string, until: Date): Promise<void> {
  if (ids.length === 0) return;
  await sql`update ${sql.table(rules.table)} set ${sql.ref(rules.endsAt)} = ${until.toISOString()} where ${heldBy(rules, ids, leaseToken)}`.execute(db);
}

/** Gives a row back from the claim that holds it, due again at `now`: another claim may take it at once. */
export async function giveBack(db: Kysely<Tables>, rules: LeaseRules, lease: Lease, now: Date): Promise<void> {
  await sql`update ${sql.table(rules.table)} set lease_token = null, ${sql.ref(rules.endsAt)} = ${now.toISOString()} where ${heldBy(rules, lease.id, lease.lease_token)}`.execute(db);
}
