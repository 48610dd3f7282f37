// Idempotency records: a unique row per (scope, key), claimed before any work, so that of two
// requests racing with one key (on any number of processes) exactly one does the work.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { IdempotencyRecordTable, Tables } from './database.ts';

export type IdempotencyRecord = Selectable<IdempotencyRecordTable>;

export class IdempotencyStore {
  constructor(private readonly db: Kysely<Tables>) {}

  /**
   * Claims the key; if another record holds it, returns that record instead. Expired records give way,
   * and so do in-flight ones older than `abandonedMs`: their process died before it could finish.
   */
  async claim(scope: string, key: string, fingerprint: string, now: Date, lifetimeMs: number, abandonedMs: number): Promise<IdempotencyRecord | 'claimed'> {
    const at = now.toISOString();
    const abandoned = new Date(now.getTime() - abandonedMs).toISOString();
    await this.db
      .deleteFrom('idempotency_records')
      .where('scope', '=', scope)
      .where('key', '=', key)
      .where((eb) => eb.or([eb('expires_at', '<=', at), eb.and([eb('state', '=', 'in_flight'), eb('created_at', '<=', abandoned)])]))
      .execute();
    const inserted = await this.db
      .insertInto('idempotency_records')
      .values({ scope, key, fingerprint, state: 'in_flight', response_status: null, response_body: null, created_at: at, expires_at: new Date(now.getTime() + lifetimeMs).toISOString() })
      .onConflict((oc) => oc.columns(['scope', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (inserted) return 'claimed';
    const held = await this.db.selectFrom('idempotency_records').selectAll().where('scope', '=', scope).where('key', '=', key).executeTakeFirst();
    // Gone between the insert and the select: it expired or was released; claim again.
    return held ?? this.claim(scope, key, fingerprint, now, lifetimeMs, abandonedMs);
  }

  /** Records the response, inside the transaction that stores what the request created. */
  async complete(tx: Transaction<Tables>, scope: string, key: string, status: number, body: unknown): Promise<void> {
    await tx
      .updateTable('idempotency_records')
      .set({ state: 'completed', response_status: status, response_body: JSON.stringify(body) })
      .where('scope', '=', scope)
      .where('key', '=', key)
      .execute();
  }

  /** Gives the key back: the request was refused before it created anything. */
  async release(scope: string, key: string): Promise<void> {
    await this.db.deleteFrom('idempotency_records').where('scope', '=', scope).where('key', '=', key).where('state', '=', 'in_flight').execute();
  }

  async purgeExpired(now: Date): Promise<number> {
    const result = await this.db.deleteFrom('idempotency_records').where('expires_at', '<=', now.toISOString()).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
