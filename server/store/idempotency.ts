// Idempotency records: a unique row per (owner, scope, key), claimed before any work, so that of two
// requests racing with one key (on any number of processes) exactly one does the work. A claim names
// its holder, the process doing the work (store/claimHolder.ts), and dies with it: a retry after a crash
// takes the claim over at once. The work commits only if the claim is still its own, so a claim taken
// over from a process that was in fact alive (its lock session dropped) cannot send anything twice.
import type { ExpressionBuilder, Kysely, Selectable, Transaction } from 'kysely';
import type { ClaimHolder } from './claimHolder.ts';
import type { IdempotencyRecordTable, Tables } from './database.ts';

export type IdempotencyRecord = Selectable<IdempotencyRecordTable>;

/** Which record: the API key's id, the method and path, the Idempotency-Key. */
export interface IdempotencyKey {
  owner: string;
  scope: string;
  key: string;
}

/** A claim this process holds. */
export interface HeldClaim extends IdempotencyKey {
  holder: string;
}

/** The claim was taken over by another request: this one must not commit. */
export class ClaimLostError extends Error {
  constructor() {
    super('the idempotency claim was taken over by another request');
  }
}

export class IdempotencyStore {
  /** The claims of this process whose requests are still running, by record. */
  private readonly running = new Set<string>();

  constructor(
    private readonly db: Kysely<Tables>,
    private readonly holders: ClaimHolder,
  ) {}

  /**
   * Claims the key; if another record holds it, returns that record instead. Expired records give way,
   * and so do in-flight ones whose holder is dead or that are older than `abandonedMs` (a last resort,
   * for a holder that is alive but stuck, or a pid that was reused).
   */
  async claim(id: IdempotencyKey, fingerprint: string, now: Date, lifetimeMs: number, abandonedMs: number): Promise<{ claim: HeldClaim } | { held: IdempotencyRecord }> {
    const holder = await this.holders.id();
    const at = now.toISOString();
    const abandoned = new Date(now.getTime() - abandonedMs).toISOString();
    for (let attempt = 0; attempt < 10; attempt++) {
      const inserted = await this.db
        .insertInto('idempotency_records')
        .values({ ...id, fingerprint, state: 'in_flight', holder, response_status: null, response_body: null, created_at: at, expires_at: new Date(now.getTime() + lifetimeMs).toISOString() })
        .onConflict((oc) => oc.columns(['owner', 'scope', 'key']).doNothing())
        .returning('key')
        .executeTakeFirst();
      if (inserted) {
        this.running.add(recordOf(id));
        return { claim: { ...id, holder } };
      }
      const held = await this.find(id);
      if (!held) continue; // released or taken over and done with between the two statements
      if (!(await this.givesWay(held, holder, at, abandoned))) return { held };
      // Deletes that very record only: another process may have taken it over since it was read.
      await this.db
        .deleteFrom('idempotency_records')
        .where(sameKey(id))
        .where('state', '=', held.state)
        .where('created_at', '=', held.created_at)
        .where((eb) => (held.holder === null ? eb('holder', 'is', null) : eb('holder', '=', held.holder)))
        .execute();
    }
    throw new Error(`the idempotency key ${id.key} kept changing hands`);
  }

  private async givesWay(held: IdempotencyRecord, holder: string, at: string, abandoned: string): Promise<boolean> {
    if (held.expires_at <= at) return true;
    if (held.state !== 'in_flight') return false;
    if (held.created_at <= abandoned) return true;
    // This process's own claim gives way only if no request of it holds it still: one left behind
    // when giving it back failed (the database away as the request ended).
    if (held.holder === holder) return !this.running.has(recordOf(held));
    return held.holder === null || !(await this.holders.isAlive(held.holder));
  }

  find(id: IdempotencyKey): Promise<IdempotencyRecord | undefined> {
    return this.db.selectFrom('idempotency_records').selectAll().where(sameKey(id)).executeTakeFirst();
  }

  /**
   * Records the response, inside the transaction that stores what the request created; throws
   * ClaimLostError, rolling that transaction back, if the claim is no longer this process's.
   */
  async complete(tx: Transaction<Tables>, claim: HeldClaim, status: number, body: unknown): Promise<void> {
    const result = await tx
      .updateTable('idempotency_records')
      .set({ state: 'completed', response_status: status, response_body: JSON.stringify(body) })
      .where(sameKey(claim))
      .where('holder', '=', claim.holder)
      .where('state', '=', 'in_flight')
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) throw new ClaimLostError();
  }

  /** The request holding the claim has ended, whether its claim was completed, given back, or neither. */
  settled(claim: HeldClaim): void {
    this.running.delete(recordOf(claim));
  }

  /** Gives the key back: the request ended without creating anything. */
  async release(claim: HeldClaim): Promise<void> {
    await this.db
      .deleteFrom('idempotency_records')
      .where(sameKey(claim))
      .where('holder', '=', claim.holder)
      .where('state', '=', 'in_flight')
      .execute();
  }

  async purgeExpired(now: Date): Promise<number> {
    const result = await this.db.deleteFrom('idempotency_records').where('expires_at', '<=', now.toISOString()).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Ends this process's hold on its claims; after the requests in flight have finished. */
  close(): Promise<void> {
    return this.holders.close();
  }
}

const recordOf = ({ owner, scope, key }: IdempotencyKey) => JSON.stringify([owner, scope, key]);

/** The record of one key: (owner, scope, key) is its primary key. */
const sameKey = ({ owner, scope, key }: IdempotencyKey) => (eb: ExpressionBuilder<Tables, 'idempotency_records'>) => eb.and({ owner, scope, key });
