// Emails and the outbox they wait in. Workers claim due rows by pushing next_attempt_at forward by a
// lease; a worker that dies leaves its rows to come due again when the lease runs out, so nothing
// accepted is lost (delivery is at least once). On PostgreSQL claims skip rows other workers hold.
// Each claim also sets a token of its own, and an outcome is recorded only with the token of the claim
// that holds the row, and only while it is pending: a worker whose lease ran out, or a late answer,
// can neither undo another worker's outcome nor overwrite `delivered` or `failed`.
import { randomUUID } from 'node:crypto';
import type { ExpressionBuilder, Kysely, Selectable, Transaction } from 'kysely';
import type { DialectName, EmailEvent, EmailTable, Tables } from './database.ts';
import { EventStore } from './events.ts';
import { suppress } from './suppressions.ts';

/** An email as stored; the lease token is the outbox's own business. */
export type EmailRecord = Omit<Selectable<EmailTable>, 'lease_token'>;
/** An email a worker has claimed, with the token that lets it record the outcome. */
export type ClaimedEmail = EmailRecord & { lease_token: string };
export type Lease = Pick<ClaimedEmail, 'id' | 'lease_token'>;

const PENDING: EmailEvent[] = ['queued', 'delivery_delayed'];

/** The row this lease holds, while it is still pending. */
const heldBy =
  ({ id, lease_token }: Lease) =>
  (eb: ExpressionBuilder<Tables, 'emails'>) =>
    eb.and([eb('id', '=', id), eb('lease_token', '=', lease_token), eb('last_event', 'in', PENDING)]);

export class EmailStore {
  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
  ) {}

  async insertMany(tx: Transaction<Tables> | Kysely<Tables>, records: EmailRecord[]): Promise<void> {
    // SQLite allows 32,766 bound values per statement; 100 emails of 18 columns stay well under.
    if (records.length > 0) await tx.insertInto('emails').values(records).execute();
  }

  find(id: string): Promise<EmailRecord | undefined> {
    return this.db.selectFrom('emails').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Claims up to `limit` due emails for `leaseMs`, oldest due first. */
  async claimNextBatch(limit: number, now: Date, leaseMs: number): Promise<ClaimedEmail[]> {
    const due = this.db
      .selectFrom('emails')
      .select('id')
      .where('last_event', 'in', PENDING)
      .where('next_attempt_at', '<=', now.toISOString())
      .orderBy('next_attempt_at')
      .limit(limit);
    const claimed = await this.db
      .updateTable('emails')
      .set((eb) => ({ next_attempt_at: new Date(now.getTime() + leaseMs).toISOString(), attempts: eb('attempts', '+', 1), lease_token: randomUUID() }))
      .where('id', 'in', this.dialect === 'postgres' ? due.forUpdate().skipLocked() : due)
      .where('last_event', 'in', PENDING)
      .returningAll()
      .execute();
    return claimed as ClaimedEmail[];
  }

  /**
   * Records deliveries in one transaction (a commit per email would cost more than the sending), each
   * only if its lease still holds; returns the ids recorded.
   */
  async markDelivered(deliveries: (Lease & { messageId: string; text: string | null; raw?: string })[], at: Date): Promise<string[]> {
    if (deliveries.length === 0) return [];
    const updated_at = at.toISOString();
    return this.db.transaction().execute(async (tx) => {
      const recorded: string[] = [];
      for (const { id, lease_token, messageId, text, raw } of deliveries) {
        const row = await tx
          .updateTable('emails')
          .where(heldBy({ id, lease_token }))
          .set({ last_event: 'delivered', message_id: messageId, text, last_error: null, updated_at, lease_token: null })
          .returning('id')
          .executeTakeFirst();
        if (!row) continue;
        recorded.push(id);
        if (raw !== undefined) {
          await tx.insertInto('captured_messages').values({ email_id: id, raw, captured_at: updated_at }).onConflict((oc) => oc.column('email_id').doNothing()).execute();
        }
      }
      return recorded;
    });
  }

  /** Puts the email back in the outbox until `retryAt`; false if the lease no longer holds. */
  async markDelayed(lease: Lease, error: string, retryAt: Date, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable('emails')
      .where(heldBy(lease))
      .set({ last_event: 'delivery_delayed', last_error: error, next_attempt_at: retryAt.toISOString(), updated_at: at.toISOString(), lease_token: null })
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Fails the email for good; false if the lease no longer holds. */
  async markFailed(lease: Lease, error: string, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable('emails')
      .where(heldBy(lease))
      .set({ last_event: 'failed', last_error: error, updated_at: at.toISOString(), lease_token: null })
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Withdraws the email before it goes out (its contact left the list); false if the lease no longer holds. */
  async markCanceled(lease: Lease, reason: string, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable('emails')
      .where(heldBy(lease))
      .set({ last_event: 'canceled', last_error: reason, updated_at: at.toISOString(), lease_token: null })
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Withdraws the email because every recipient is suppressed, recording `email.suppressed` with
   * `data` in the same transaction; false if the lease no longer holds.
   */
  async markSuppressed(lease: Lease, data: unknown, reason: string, at: Date): Promise<boolean> {
    const updated_at = at.toISOString();
    return this.db.transaction().execute(async (tx) => {
      const row = await tx.updateTable('emails').where(heldBy(lease)).set({ last_event: 'suppressed', last_error: reason, updated_at, lease_token: null }).returning('id').executeTakeFirst();
      if (!row) return false;
      await new EventStore(this.db).record(tx, [{ type: 'email.suppressed', email_id: lease.id, data, created_at: updated_at }]);
      return true;
    });
  }

  /**
   * The relay refused the email for good: it ends `bounced`, with `email.bounced` carrying `bounce`,
   * and each refused address is suppressed, all in one transaction; false if the lease no longer holds.
   */
  async markBounced(lease: Lease, bounce: { message: string }, refused: string[], at: Date): Promise<boolean> {
    const updated_at = at.toISOString();
    return this.db.transaction().execute(async (tx) => {
      const row = await tx.updateTable('emails').where(heldBy(lease)).set({ last_event: 'bounced', last_error: bounce.message.slice(0, 500), updated_at, lease_token: null }).returning('id').executeTakeFirst();
      if (!row) return false;
      await new EventStore(this.db).record(tx, [{ type: 'email.bounced', email_id: lease.id, data: { bounce }, created_at: updated_at }]);
      await suppress(tx, refused.map((email) => ({ email, origin: 'bounce', source_id: lease.id })), updated_at);
      return true;
    });
  }

  capturedMessage(id: string): Promise<string | undefined> {
    return this.db.selectFrom('captured_messages').select('raw').where('email_id', '=', id).executeTakeFirst().then((r) => r?.raw);
  }
}
