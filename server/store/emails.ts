// Emails and the outbox they wait in. Workers claim due rows by pushing next_attempt_at forward by a
// lease; a worker that dies leaves its rows to come due again when the lease runs out, so nothing
// accepted is lost (delivery is at least once). On PostgreSQL claims skip rows other workers hold.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DialectName, EmailEvent, EmailTable, Tables } from './database.ts';

export type EmailRecord = Selectable<EmailTable>;

const PENDING: EmailEvent[] = ['queued', 'delivery_delayed'];

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
  async claimNextBatch(limit: number, now: Date, leaseMs: number): Promise<EmailRecord[]> {
    const due = this.db
      .selectFrom('emails')
      .select('id')
      .where('last_event', 'in', PENDING)
      .where('next_attempt_at', '<=', now.toISOString())
      .orderBy('next_attempt_at')
      .limit(limit);
    return this.db
      .updateTable('emails')
      .set((eb) => ({ next_attempt_at: new Date(now.getTime() + leaseMs).toISOString(), attempts: eb('attempts', '+', 1) }))
      .where('id', 'in', this.dialect === 'postgres' ? due.forUpdate().skipLocked() : due)
      .where('last_event', 'in', PENDING)
      .returningAll()
      .execute();
  }

  /** Records deliveries in one transaction: a commit per email would cost more than the sending. */
  async markDelivered(deliveries: { id: string; messageId: string; text: string | null; raw?: string }[], at: Date): Promise<void> {
    if (deliveries.length === 0) return;
    const updated_at = at.toISOString();
    await this.db.transaction().execute(async (tx) => {
      for (const { id, messageId, text } of deliveries) {
        await tx.updateTable('emails').set({ last_event: 'delivered', message_id: messageId, text, last_error: null, updated_at }).where('id', '=', id).execute();
      }
      const captured = deliveries.filter((d) => d.raw !== undefined).map((d) => ({ email_id: d.id, raw: d.raw!, captured_at: updated_at }));
      if (captured.length) await tx.insertInto('captured_messages').values(captured).onConflict((oc) => oc.column('email_id').doNothing()).execute();
    });
  }

  async markDelayed(id: string, error: string, retryAt: Date, at: Date): Promise<void> {
    await this.db.updateTable('emails').set({ last_event: 'delivery_delayed', last_error: error, next_attempt_at: retryAt.toISOString(), updated_at: at.toISOString() }).where('id', '=', id).execute();
  }

  async markFailed(id: string, error: string, at: Date): Promise<void> {
    await this.db.updateTable('emails').set({ last_event: 'failed', last_error: error, updated_at: at.toISOString() }).where('id', '=', id).execute();
  }

  capturedMessage(id: string): Promise<string | undefined> {
    return this.db.selectFrom('captured_messages').select('raw').where('email_id', '=', id).executeTakeFirst().then((r) => r?.raw);
  }
}
