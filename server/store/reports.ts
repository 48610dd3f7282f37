// Reports about an email after it left: a delivery status notification (delivered, delayed, failed),
// a complaint, or a relay refusing some of its recipients. Each is applied in one transaction that
// reads the email locked, asks the caller what the report changes (the rules live with the caller,
// server/delivery/report.ts), and writes the email's last_event, the event with its webhook
// deliveries, and any suppressions together.
import type { Kysely } from 'kysely';
import type { DialectName, EmailEvent, Tables } from './database.ts';
import type { EmailRecord } from './emails.ts';
import type { EventStore, NewEvent } from './events.ts';
import { keptText } from './outsideText.ts';
import { suppress, type NewSuppression } from './suppressions.ts';

/** What a report changes: the email's state, the event recorded, the addresses suppressed. */
export interface ReportChange {
  last_event: EmailEvent;
  event: Omit<NewEvent, 'email_id' | 'contact_id' | 'created_at'>;
  suppress: NewSuppression[];
  /**
   * Whether the email must never come due in the outbox again: a relay holds it (a delay it reports
   * is the relay's to retry), though `delivery_delayed` is a state the outbox otherwise retries.
   */
  park?: boolean;
  /** What the email records as its last error, when the change is a failure. */
  error?: string;
}

/**
 * What a decision answers for a report about an email the relay may have taken while the worker has
 * not yet recorded it (`queued`): the report is refused for now, and comes again once it can apply.
 */
export const TOO_EARLY = 'too_early';

export type ReportOutcome = 'recorded' | 'unchanged' | 'unknown_email' | typeof TOO_EARLY;

/** Never: an email parked here is not claimed again. */
const PARKED = '9999-12-31T23:59:59.999Z';

export class ReportStore {
  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
    private readonly events: EventStore,
  ) {}

  /** Applies what `decide` makes of the report for the email; `unchanged` when it makes nothing (a repeat). */
  async apply(emailId: string, decide: (email: EmailRecord) => ReportChange | typeof TOO_EARLY | undefined, at: Date): Promise<ReportOutcome> {
    const now = at.toISOString();
    return this.db.transaction().execute(async (tx) => {
      const read = tx.selectFrom('emails').selectAll().where('id', '=', emailId);
      // SQLite's transaction holds the write lock from its start (see database.ts).
      const email = await (this.dialect === 'postgres' ? read.forUpdate() : read).executeTakeFirst();
      if (!email) return 'unknown_email';
      const { lease_token: _, ...record } = email;
      const change = decide(record);
      if (!change) return 'unchanged';
      if (change === TOO_EARLY) return TOO_EARLY;
      await tx
        .updateTable('emails')
        .set({
          last_event: change.last_event,
          updated_at: now,
          ...(change.error !== undefined && { last_error: keptText(change.error.slice(0, 500)) }),
          // A report ends any claim: the outcome is the report's, not a worker's.
          lease_token: null,
          ...(change.park && { next_attempt_at: PARKED }),
        })
        .where('id', '=', emailId)
        .execute();
      await this.events.record(tx, [{ ...change.event, email_id: emailId, created_at: now }]);
      await suppress(tx, change.suppress, now);
      return 'recorded';
    });
  }
}
