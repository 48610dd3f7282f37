// The fan-out's SQL: a worker claims one due broadcast with a lease (the rules every outbox shares:
// store/leases.ts), then writes its outbox rows chunk by chunk in contact-id order. Each chunk is one
// transaction that first renews the lease (only while the token still holds and the broadcast is still
// `queued`), then inserts one email per eligible contact straight from a SELECT (no row passes through
// the process, so memory does not grow with the segment), then records how far it got. The
// (broadcast, contact) pair is unique in the outbox, so a chunk written again after a crash or a lost
// lease writes nobody twice.
import { sql, type Expression, type ExpressionBuilder, type Kysely, type RawBuilder, type SqlBool, type Transaction } from 'kysely';
import type { DialectName, Tables } from './database.ts';
import { giveBack, heldBy, newLease, type LeaseRules } from './leases.ts';

/** What the fan-out needs of the broadcast it holds. */
export interface HeldBroadcast {
  id: string;
  segment_id: string;
  topic_id: string | null;
  from_address: string;
  subject: string;
  reply_to: string | null;
  lease_token: string;
}

export type ChunkOutcome = 'more' | 'done' | 'lost';

/** The fan-out's leases (store/leases.ts): a broadcast is open while it is `queued`. */
const LEASES: LeaseRules = { table: 'broadcasts', endsAt: 'lease_expires_at', open: sql<SqlBool>`status = ${'queued'}` };

export class FanoutStore {
  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
  ) {}

  /**
   * Claims the oldest due broadcast (queued, or scheduled for now or earlier) whose lease is free or
   * ran out; a scheduled one becomes `queued` as it is claimed.
   */
  async claim(now: Date, leaseMs: number): Promise<HeldBroadcast | undefined> {
    const at = now.toISOString();
    const due = (eb: ExpressionBuilder<Tables, 'broadcasts'>) =>
      eb.and([
        eb.or([eb('status', '=', 'queued'), eb.and([eb('status', '=', 'scheduled'), eb('scheduled_at', '<=', at)])]),
        eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<=', at)]),
      ]);
    const { lease_token, ends } = newLease(now, leaseMs);
    const claim = { status: 'queued' as const, lease_token, lease_expires_at: ends };
    const held = ['broadcasts.id', 'segment_id', 'topic_id', 'from_address', 'subject', 'reply_to', 'lease_token'] as const;
    const next = this.db.selectFrom('broadcasts').select('id').where(due).orderBy('created_at').limit(1);
    if (this.dialect === 'sqlite') {
      const claimed = await this.db.updateTable('broadcasts').set(claim).where('id', 'in', next).where(due).returning(held).executeTakeFirst();
      return claimed as HeldBroadcast | undefined;
    }
    // Materialized: as `id IN (subquery)` PostgreSQL may run the subquery again for each row it
    // updates (a nested-loop semi-join), each run skipping the rows the last one locked, and claim
    // every due broadcast at once.
    const claimed = await this.db
      .with((cte) => cte('next').materialized(), () => next.forUpdate().skipLocked())
      .updateTable('broadcasts')
      .from('next')
      .set(claim)
      .whereRef('broadcasts.id', '=', 'next.id')
      .returning(held)
      .executeTakeFirst();
    return claimed as HeldBroadcast | undefined;
  }

  /** Writes the next `size` members' emails; `lost` if the lease no longer holds or the broadcast was canceled. */
  async writeChunk(held: HeldBroadcast, size: number, now: Date, leaseMs: number): Promise<ChunkOutcome> {
    const at = now.toISOString();
    return this.db.transaction().execute(async (tx) => {
      // First, so that on PostgreSQL the row stays locked to the end: a cancel waits for this chunk.
      const renewed = await tx
        .updateTable('broadcasts')
        .set({ lease_expires_at: new Date(now.getTime() + leaseMs).toISOString() })
        .where(heldBy(LEASES, held.id, held.lease_token))
        .returning('fanout_after')
        .executeTakeFirst();
      if (!renewed) return 'lost';
      const after = renewed.fanout_after ?? '';
      // The last member of this chunk (the primary key walks the segment in contact-id order); none
      // means fewer than `size` are left, and this chunk is the last.
      const last = await tx
        .selectFrom('segment_contacts')
        .select('contact_id')
        .where('segment_id', '=', held.segment_id)
        .where('contact_id', '>', after)
        .orderBy('contact_id')
        .limit(1)
        .offset(size - 1)
        .executeTakeFirst();
      await this.insertEmails(tx, held, after, last?.contact_id, now);
      if (last) {
        await tx.updateTable('broadcasts').set({ fanout_after: last.contact_id }).where('id', '=', held.id).execute();
        return 'more';
      }
      await tx.updateTable('broadcasts').set({ status: 'sent', sent_at: at, lease_token: null, lease_expires_at: null }).where('id', '=', held.id).execute();
      return 'done';
    });
  }

  /** Gives the broadcast up at once (the worker is stopping, or a chunk failed), so that another can take it over without waiting out the lease. */
  release(held: HeldBroadcast): Promise<void> {
    return giveBack(this.db, LEASES, held, new Date());
  }

  /**
   * One email per member in (after, last] who is subscribed and not suppressed, and, when the broadcast has a topic,
   * whose own choice for it (or else the topic's default) is `opt_in`. The body is not copied: it is
   * the broadcast's, personalized when the email is delivered.
   */
  private async insertEmails(tx: Transaction<Tables>, held: HeldBroadcast, after: string, last: string | undefined, now: Date): Promise<void> {
    const at = now.toISOString();
    let members = tx
      .selectFrom('segment_contacts as sc')
      .innerJoin('contacts as c', 'c.id', 'sc.contact_id')
      .where('sc.segment_id', '=', held.segment_id)
      .where('sc.contact_id', '>', after)
      .where('c.unsubscribed', '=', 0)
      // contacts.email_key and suppressions.email_key are both the lower-cased address.
      .where((eb) => eb.not(eb.exists(eb.selectFrom('suppressions as s').select('s.id').whereRef('s.email_key', '=', 'c.email_key'))));
    if (last !== undefined) members = members.where('sc.contact_id', '<=', last);
    if (held.topic_id !== null) {
      const topicId = held.topic_id;
      members = members
        .innerJoin('topics as t', (join) => join.on('t.id', '=', topicId))
        .leftJoin('contact_topics as ct', (join) => join.onRef('ct.contact_id', '=', 'sc.contact_id').on('ct.topic_id', '=', topicId))
        .where((eb) => eb(eb.fn.coalesce('ct.subscription', 't.default_subscription'), '=', 'opt_in'));
    }
    const rows = members.select((eb) => [
      this.newId(now).as('id'),
      eb.val(held.from_address).as('from_address'),
      this.recipientList(sql.ref('c.email')).as('to_addresses'),
      eb.val(held.reply_to).as('reply_to'),
      eb.val(held.subject).as('subject'),
      eb.val('queued').as('last_event'),
      eb.val(0).as('attempts'),
      eb.val(at).as('next_attempt_at'),
      eb.val(at).as('created_at'),
      eb.val(at).as('updated_at'),
      eb.val(held.id).as('broadcast_id'),
      'sc.contact_id as contact_id',
    ]);
    await tx
      .insertInto('emails')
      .columns(['id', 'from_address', 'to_addresses', 'reply_to', 'subject', 'last_event', 'attempts', 'next_attempt_at', 'created_at', 'updated_at', 'broadcast_id', 'contact_id'])
      .expression(rows)
      .onConflict((oc) => oc.columns(['broadcast_id', 'contact_id']).where('broadcast_id', 'is not', null).doNothing())
      .execute();
  }

  /**
   * A time-ordered (version 7) UUID made by the database for each row: the milliseconds of `now`, then
   * 74 random bits. Ids in creation order append to the outbox's primary-key index instead of landing
   * all over it, which keeps large fan-outs fast (see the benchmark).
   */
  private newId(now: Date): RawBuilder<string> {
    const hex = now.getTime().toString(16).padStart(12, '0');
    const prefix = `${hex.slice(0, 8)}-${hex.slice(8)}-7`;
    if (this.dialect === 'postgres') {
      // gen_random_uuid() is version 4: keep its random part, variant bits included, after the prefix.
      return sql<string>`${prefix} || substr(gen_random_uuid()::text, 16)`;
    }
    return sql<string>`${prefix} || substr(lower(hex(randomblob(2))), 2) || '-' || substr('89ab', 1 + (random() & 3), 1) || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6)))`;
  }

  /** The JSON array of one address, as `to_addresses` holds it. */
  private recipientList(email: Expression<string>): RawBuilder<string> {
    return this.dialect === 'postgres' ? sql<string>`json_build_array(${email})::text` : sql<string>`json_array(${email})`;
  }
}
