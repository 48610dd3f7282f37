// Emails and the outbox they wait in. Workers claim due rows by pushing next_attempt_at forward by a
// lease; a worker that dies leaves its rows to come due again when the lease runs out, so nothing
// accepted is lost (delivery is at least once). On PostgreSQL claims skip rows other workers hold.
// Each claim also sets a token of its own (the lease rules every outbox shares: store/leases.ts), and
// an outcome is recorded only with the token of the claim that holds the row, and only while it is
// pending: a worker whose lease ran out, or a late answer, can neither undo another worker's outcome
// nor overwrite `sent` or `failed`. Every outcome is recorded with its event (store/events.ts) in one
// transaction.
import { sql, type Expression, type Kysely, type Selectable, type SqlBool, type Transaction, type Updateable } from 'kysely';
import { inIndexOrder, type DialectName, type EmailAttachmentTable, type EmailEvent, type EmailTable, type Tables } from './database.ts';
import type { EventStore, NewEvent } from './events.ts';
import { keysetPage, type Cursor, type Order, type Page } from './keyset.ts';
import { extendLeases, heldBy, newLease, type LeaseRules } from './leases.ts';
import { keptText } from './outsideText.ts';
import { prepared, preparedInsert } from './prepared.ts';
import { bounceSuppressions, suppress } from './suppressions.ts';

/** An email as stored; the lease token, the deferred recipients and the attachment count are the outbox's own business. */
export type EmailRecord = Omit<Selectable<EmailTable>, 'lease_token' | 'deferred_recipients' | 'attachment_count'>;
/** An email a worker has claimed, with the token that lets it record the outcome. */
export type ClaimedEmail = EmailRecord & { lease_token: string; deferred_recipients: string | null; attachment_count: number };
/** A file sent with an email (see the contract's Attachment). */
export type EmailAttachment = Selectable<EmailAttachmentTable>;
const LISTED_ATTACHMENT = ['id', 'email_id', 'position', 'filename', 'content_type', 'content_id', 'size'] as const;
/** An attachment without its content. */
export type ListedAttachment = Pick<EmailAttachment, (typeof LISTED_ATTACHMENT)[number]>;
export type Lease = Pick<ClaimedEmail, 'id' | 'lease_token'>;
/** What the email list shows: no bodies, so that a page of broadcast emails personalizes only their subjects. */
const LISTED = ['id', 'from_address', 'to_addresses', 'cc', 'bcc', 'reply_to', 'subject', 'created_at', 'scheduled_at', 'last_event', 'message_id', 'broadcast_id', 'contact_id'] as const;
export type ListedEmail = Pick<EmailRecord, (typeof LISTED)[number]>;
/** What an outcome other than sending changes in the email's row. */
type Outcome = Pick<EmailTable, 'last_event' | 'last_error'> & Partial<Pick<Selectable<EmailTable>, 'next_attempt_at' | 'deferred_recipients' | 'message_id' | 'text'>>;
/**
 * What the relay did with some of an email's recipients while it deferred others: `sent`, it took the
 * message for some (`final`: the relay is their own server); `refused`, it refused some for good.
 */
export interface PartlyTaken {
  sent?: { messageId: string; text: string | null; final?: boolean };
  refused?: { bounce: { message: string }; addresses: string[] };
}

/** What waits in the outbox, in the order the emails_due index names them (SQLite matches its condition as written). */
const PENDING: EmailEvent[] = ['queued', 'scheduled', 'delivery_delayed'];

/** Why a scheduled email could not be rescheduled or canceled. */
export type ScheduleRefusal = { refused: 'not_found' } | { refused: 'last_event'; last_event: EmailEvent } | { refused: 'sending' };

/** The outbox's leases (store/leases.ts): an email is open while it is pending, and its lease ends when it comes due again. */
const LEASES: LeaseRules = { table: 'emails', endsAt: 'next_attempt_at', open: sql<SqlBool>`last_event in (${sql.join(PENDING)})` };

export class EmailStore {
  /** Emails in (created_at, id) order, as emails_newest_first holds them. */
  private readonly order: Order;
  /** Compiled for this store's database: each dialect writes its own SQL. */
  private readonly insertEmails = preparedInsert<Tables, 'emails'>('emails');
  /** SQLite: records one delivery of a group commit; runs once per email sent. */
  private readonly recordSending;

  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
    private readonly events: EventStore,
  ) {
    this.order = {
      time: 'created_at',
      id: 'id',
      position: async (id) => {
        const at = await db.selectFrom('emails').select(['created_at', 'id']).where('id', '=', id).executeTakeFirst();
        return at && { time: at.created_at, id: at.id };
      },
    };
    this.recordSending = prepared(db, (slot: (name: 'id' | 'lease_token' | 'last_event' | 'message_id' | 'text' | 'updated_at') => string) =>
      db
        .updateTable('emails')
        .where(heldBy(LEASES, slot('id'), slot('lease_token')))
        .set({ last_event: slot('last_event') as EmailEvent, message_id: slot('message_id'), text: slot('text'), last_error: null, updated_at: slot('updated_at'), lease_token: null, deferred_recipients: null })
        .returning('id'),
    );
  }

  /** Inserts emails, and the attachments of any that have some. */
  async insertMany(tx: Transaction<Tables> | Kysely<Tables>, records: EmailRecord[], attachments: EmailAttachment[] = []): Promise<void> {
    if (attachments.length === 0) {
      // SQLite allows 32,766 bound values per statement; 100 emails of 18 columns stay well under.
      await this.insertEmails(tx, records);
      return;
    }
    const counts = new Map<string, number>();
    for (const { email_id } of attachments) counts.set(email_id, (counts.get(email_id) ?? 0) + 1);
    await this.insertEmails(tx, records.map((record) => ({ ...record, attachment_count: counts.get(record.id) ?? 0 })));
    // One statement each: an attachment's content may be megabytes.
    for (const attachment of attachments) await tx.insertInto('email_attachments').values(attachment).execute();
  }

  /** The attachments of an email, in the order given. */
  attachments(emailId: string): Promise<EmailAttachment[]> {
    return this.db.selectFrom('email_attachments').selectAll().where('email_id', '=', emailId).orderBy('position').execute();
  }

  /** What an email's attachments are (or the one with `attachmentId`), in the order given, without their content. */
  attachmentsListed(emailId: string, attachmentId?: string): Promise<ListedAttachment[]> {
    const query = this.db.selectFrom('email_attachments').select(LISTED_ATTACHMENT).where('email_id', '=', emailId);
    return (attachmentId === undefined ? query : query.where('id', '=', attachmentId)).orderBy('position').execute();
  }

  /** One attachment of an email, content and all. */
  attachment(emailId: string, attachmentId: string): Promise<EmailAttachment | undefined> {
    return this.db.selectFrom('email_attachments').selectAll().where('email_id', '=', emailId).where('id', '=', attachmentId).executeTakeFirst();
  }

  find(id: string): Promise<EmailRecord | undefined> {
    return this.db.selectFrom('emails').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * A page of the log, newest first, of every email or those whose last event is `lastEvent`. The
   * filter walks the newest-first index: an index on the status would be rewritten by every delivery.
   */
  page(limit: number, cursor: Cursor, lastEvent?: EmailEvent): Promise<Page<ListedEmail>> {
    const query = this.db.selectFrom('emails').select(LISTED);
    return keysetPage(lastEvent ? query.where('last_event', '=', lastEvent) : query, this.order, limit, cursor);
  }

  /**
   * The ids of up to `limit` due emails, oldest due first, over the emails_due index. SQLite's planner,
   * which has no statistics, chose emails_by_state and sorted every pending email instead, so it is told
   * the index; its condition must then be written with literals, as the index states it. PostgreSQL
   * finds emails_due by itself.
   */
  dueEmails(limit: number, now: Date): Expression<any> {
    if (this.dialect === 'sqlite') {
      const pending = sql.join(PENDING.map((event) => sql.lit(event)));
      return sql<string>`(select id from emails indexed by emails_due where last_event in (${pending}) and next_attempt_at <= ${now.toISOString()} order by next_attempt_at limit ${limit})`;
    }
    return this.db.selectFrom('emails').select('id').where('last_event', 'in', PENDING).where('next_attempt_at', '<=', now.toISOString()).orderBy('next_attempt_at').limit(limit).forUpdate().skipLocked();
  }

  /**
   * Claims up to `limit` due emails for `leaseMs`, oldest due first. On PostgreSQL a row another claim
   * changed meanwhile is checked again; SQLite runs the statement under its one write lock, where the
   * rows picked are the rows updated, and the same check there led its planner to read every pending
   * email through emails_by_state, an order of magnitude slower with a large outbox (docs/performance.md).
   */
  async claimNextBatch(limit: number, now: Date, leaseMs: number): Promise<ClaimedEmail[]> {
    const { lease_token, ends } = newLease(now, leaseMs);
    const claim = (db: Kysely<Tables>) =>
      db
        .updateTable('emails')
        .set((eb) => ({ next_attempt_at: ends, attempts: eb('attempts', '+', 1), lease_token }))
        .where('id', 'in', this.dueEmails(limit, now));
    if (this.dialect === 'sqlite') return (await claim(this.db).returningAll().execute()) as ClaimedEmail[];
    return inIndexOrder(this.db, async (tx) => (await claim(tx).where('last_event', 'in', PENDING).returningAll().execute()) as ClaimedEmail[]);
  }

  /**
   * Extends until `until` the claim `leaseToken` holds on the emails `ids` that have no outcome yet:
   * a worker still sending them (a slow relay, or a long wait for its connections) keeps them from
   * coming due for another worker, which would send them again.
   */
  extendLeases(ids: string[], leaseToken: string, until: Date): Promise<void> {
    return extendLeases(this.db, LEASES, ids, leaseToken, until);
  }

  /**
   * Records messages handed to the transport, in one transaction (a commit per email would cost more
   * than the sending), each only if its lease still holds; returns the ids recorded. Each is `sent`;
   * where the transport is the final destination (`final`) it is `delivered` too, both events recorded.
   */
  async markDelivered(deliveries: (Lease & { messageId: string; text: string | null; raw?: string })[], at: Date, final: boolean): Promise<string[]> {
    if (deliveries.length === 0) return [];
    const updated_at = at.toISOString();
    const last_event: EmailEvent = final ? 'delivered' : 'sent';
    return this.db.transaction().execute(async (tx) => {
      const held = await this.recordSendings(tx, deliveries, last_event, updated_at);
      const recorded: string[] = [];
      const events: NewEvent[] = [];
      for (const { id, raw } of deliveries) {
        if (!held.has(id)) continue;
        recorded.push(id);
        events.push({ type: 'email.sent', email_id: id, created_at: updated_at });
        if (final) events.push({ type: 'email.delivered', email_id: id, created_at: updated_at });
        if (raw !== undefined) {
          await tx.insertInto('captured_messages').values({ email_id: id, raw, captured_at: updated_at }).onConflict((oc) => oc.column('email_id').doNothing()).execute();
        }
      }
      await this.events.record(tx, events);
      return recorded;
    });
  }

  /** Marks each delivery's email `last_event` if its lease holds; returns the ids that it held. */
  private async recordSendings(tx: Transaction<Tables>, deliveries: (Lease & { messageId: string; text: string | null })[], last_event: EmailEvent, updated_at: string): Promise<Set<string>> {
    const held = new Set<string>();
    if (this.dialect === 'sqlite') {
      // A statement costs SQLite no round trip, and one compiled statement an email measured faster
      // than one statement for the group.
      for (const { id, lease_token, messageId, text } of deliveries) {
        for (const row of await this.recordSending({ id, lease_token, last_event, message_id: messageId, text, updated_at }, tx)) held.add(row.id);
      }
      return held;
    }
    // PostgreSQL: one statement for the group rather than a round trip per email (small emails went
    // from 1,197 to 1,434 a second); 1,000 rows a statement at most.
    for (let i = 0; i < deliveries.length; i += 1000) {
      const rows = sql.join(deliveries.slice(i, i + 1000).map((d) => sql`(${d.id}, ${d.lease_token}, ${d.messageId}, ${d.text})`));
      // VALUES names its columns column1, column2...
      const { rows: updated } = await sql<{ id: string }>`
        update emails set last_event = ${last_event}, message_id = v.column3, text = v.column4, last_error = null, updated_at = ${updated_at}, lease_token = null, deferred_recipients = null
        from (values ${rows}) as v
        where emails.id = v.column1 and emails.lease_token = v.column2 and emails.last_event in (${sql.join(PENDING)})
        returning emails.id`.execute(tx);
      for (const row of updated) held.add(row.id);
    }
    return held;
  }

  /**
   * Puts the email back in the outbox until `retryAt`; false if the lease no longer holds. When the
   * relay put off some recipients, `deferred` are the ones the next attempt goes to; what it did with
   * the others (`partly`) is recorded with the delay. All in one transaction.
   */
  markDelayed(lease: Lease, error: string, retryAt: Date, at: Date, { deferred, ...partly }: { deferred?: string[] } & PartlyTaken = {}): Promise<boolean> {
    const { change, taken, refused } = partlyTaken(lease, partly);
    const delayed = { type: 'email.delivery_delayed', data: { reason: error } } as const;
    const outcome = {
      ...change,
      last_event: 'delivery_delayed',
      last_error: error,
      next_attempt_at: retryAt.toISOString(),
      ...(deferred && { deferred_recipients: JSON.stringify(deferred) }),
    } as const;
    return this.conclude(lease, outcome, [...taken, delayed, ...refused.events], at, refused.suppress);
  }

  /**
   * Fails the email for good; false if the lease no longer holds. What the relay did with the other
   * recipients on this last attempt (`partly`) is recorded first, in the same transaction: the email
   * fails for the recipients it deferred alone.
   */
  markFailed(lease: Lease, error: string, at: Date, partly: PartlyTaken = {}): Promise<boolean> {
    const { change, taken, refused } = partlyTaken(lease, partly);
    const failed = { type: 'email.failed', data: { failed: { reason: error } } } as const;
    return this.conclude(lease, { ...change, last_event: 'failed', last_error: error }, [...taken, ...refused.events, failed], at, refused.suppress);
  }

  /** Withdraws the email before it goes out (its contact left the list); false if the lease no longer holds. */
  markCanceled(lease: Lease, reason: string, at: Date): Promise<boolean> {
    return this.conclude(lease, { last_event: 'canceled', last_error: reason }, { type: 'email.canceled', data: { reason } }, at);
  }

  /**
   * Records one outcome of the claim `lease` holds, with its event and whatever `also` writes, in one
   * transaction; false if the lease no longer holds.
   */
  private conclude(lease: Lease, change: Outcome, event: Pick<NewEvent, 'type' | 'data'> | Pick<NewEvent, 'type' | 'data'>[], at: Date, also?: (tx: Transaction<Tables>, at: string) => Promise<unknown>): Promise<boolean> {
    const updated_at = at.toISOString();
    return this.db.transaction().execute(async (tx) => {
      const last_error = change.last_error === null ? null : keptText(change.last_error);
      const result = await tx.updateTable('emails').where(heldBy(LEASES, lease.id, lease.lease_token)).set({ ...change, last_error, updated_at, lease_token: null }).executeTakeFirst();
      if (Number(result.numUpdatedRows) !== 1) return false;
      await this.events.record(tx, [event].flat().map((e) => ({ ...e, email_id: lease.id, created_at: updated_at })));
      await also?.(tx, updated_at);
      return true;
    });
  }

  /**
   * Withdraws the email because every recipient is suppressed, recording `email.suppressed` with
   * `data` in the same transaction; false if the lease no longer holds.
   */
  markSuppressed(lease: Lease, data: unknown, reason: string, at: Date): Promise<boolean> {
    return this.conclude(lease, { last_event: 'suppressed', last_error: reason }, { type: 'email.suppressed', data }, at);
  }

  /**
   * The relay refused the email for good: it ends `bounced`, with `email.bounced` carrying `bounce`,
   * and each refused address is suppressed, all in one transaction; false if the lease no longer holds.
   */
  markBounced(lease: Lease, bounce: { message: string }, refused: string[], at: Date): Promise<boolean> {
    const suppressRefused = (tx: Transaction<Tables>, now: string) => suppress(tx, bounceSuppressions(lease.id, refused), now);
    return this.conclude(lease, { last_event: 'bounced', last_error: bounce.message.slice(0, 500) }, { type: 'email.bounced', data: { bounce } }, at, suppressRefused);
  }

  /**
   * Moves a scheduled email to `scheduledAt`, or queues it now when that is null, recording
   * `email.scheduled` for a new time; refused unless the email is `scheduled` and no delivery holds it.
   */
  reschedule(id: string, scheduledAt: string | null, now: Date): Promise<ScheduleRefusal | undefined> {
    const at = now.toISOString();
    // A claim whose lease ran out loses its hold, as on cancel: its late outcome cannot overwrite the new time.
    const change: Updateable<EmailTable> = scheduledAt ? { scheduled_at: scheduledAt, next_attempt_at: scheduledAt, lease_token: null } : { last_event: 'queued' as const, scheduled_at: null, next_attempt_at: at, lease_token: null };
    return this.changeScheduled(id, now, change, scheduledAt ? { type: 'email.scheduled', email_id: id, created_at: at } : undefined);
  }

  /** Withdraws a scheduled email: it ends `canceled`, with its event; refused as `reschedule` is. */
  cancel(id: string, now: Date): Promise<ScheduleRefusal | undefined> {
    const at = now.toISOString();
    const event: NewEvent = { type: 'email.canceled', email_id: id, data: { reason: 'the scheduled email was canceled' }, created_at: at };
    return this.changeScheduled(id, now, { last_event: 'canceled', lease_token: null }, event);
  }

  /**
   * Changes a scheduled email no delivery holds (none claimed it, or its claim's lease ran out, as a
   * broadcast's cancel has it), with its event, in one transaction; otherwise says why not.
   */
  private async changeScheduled(id: string, now: Date, change: Updateable<EmailTable>, event: NewEvent | undefined): Promise<ScheduleRefusal | undefined> {
    const at = now.toISOString();
    const changed = await this.db.transaction().execute(async (tx) => {
      const row = await tx
        .updateTable('emails')
        .set({ ...change, updated_at: at })
        .where('id', '=', id)
        .where('last_event', '=', 'scheduled')
        .where((eb) => eb.or([eb('lease_token', 'is', null), eb('next_attempt_at', '<=', at)]))
        .returning('id')
        .executeTakeFirst();
      if (row && event) await this.events.record(tx, [event]);
      return row !== undefined;
    });
    if (changed) return undefined;
    const email = await this.db.selectFrom('emails').select('last_event').where('id', '=', id).executeTakeFirst();
    if (!email) return { refused: 'not_found' };
    return email.last_event === 'scheduled' ? { refused: 'sending' } : { refused: 'last_event', last_event: email.last_event };
  }

  capturedMessage(id: string): Promise<string | undefined> {
    return this.db.selectFrom('captured_messages').select('raw').where('email_id', '=', id).executeTakeFirst().then((r) => r?.raw);
  }
}

/**
 * What a send the relay took for some recipients, or refused for good for some, writes beside its
 * outcome: the Message-ID and text, with `email.sent` (and `email.delivered` where the relay is the
 * recipients' own server); `email.bounced`, with the refused addresses suppressed.
 */
function partlyTaken(lease: Lease, { sent, refused }: PartlyTaken) {
  const change = sent ? { message_id: sent.messageId, ...(sent.text !== null && { text: sent.text }) } : {};
  const taken: Pick<NewEvent, 'type'>[] = sent ? [{ type: 'email.sent' }, ...(sent.final ? [{ type: 'email.delivered' as const }] : [])] : [];
  const events: Pick<NewEvent, 'type' | 'data'>[] = refused ? [{ type: 'email.bounced', data: { bounce: refused.bounce } }] : [];
  const suppressRefused = refused && ((tx: Transaction<Tables>, now: string) => suppress(tx, bounceSuppressions(lease.id, refused.addresses), now));
  return { change, taken, refused: { events, suppress: suppressRefused } };
}
