// Broadcasts and their status. Each move (change, delete, send, cancel) is one conditional statement on
// the status it starts from, so two calls racing on one broadcast cannot both win: the second finds the
// status moved, and is told which status it found.
import type { ExpressionBuilder, Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';
import type { BroadcastTable, EmailEvent, Tables } from './database.ts';
import type { EventStore } from './events.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';
import { prepared } from './prepared.ts';
import { InUseByBroadcast } from './missing.ts';

export type BroadcastRecord = Selectable<BroadcastTable>;
export type BroadcastStatus = BroadcastRecord['status'];
export type BroadcastChanges = Omit<Updateable<BroadcastTable>, 'id' | 'status' | 'created_at' | 'scheduled_at' | 'sent_at' | 'lease_token' | 'lease_expires_at' | 'fanout_after'>;
const LISTED = ['id', 'name', 'segment_id', 'status', 'created_at', 'scheduled_at', 'sent_at', 'topic_id'] as const;
export type ListedBroadcast = Pick<BroadcastRecord, (typeof LISTED)[number]>;

/** Why a move was refused: what the broadcast lacks, or the status it is in. */
export type Refusal =
  | { refused: 'not_found' }
  | { refused: 'status'; status: BroadcastStatus }
  | { refused: 'segment'; segmentId: string }
  | { refused: 'topic'; topicId: string }
  | { refused: 'body' };

class Refused extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.refused);
  }
}

/** A broadcast's email in one of these has not gone out yet. */
const PENDING: EmailEvent[] = ['queued', 'delivery_delayed'];
type Db = Kysely<Tables> | Transaction<Tables>;

/** The broadcast can go: a draft whose segment (and topic, if it has one) exist, with a body not empty. */
const sendable = (eb: ExpressionBuilder<Tables, 'broadcasts'>) =>
  eb.and([
    eb('broadcasts.status', '=', 'draft'),
    eb.exists(eb.selectFrom('segments').select('segments.id').whereRef('segments.id', '=', 'broadcasts.segment_id')),
    eb.or([eb('broadcasts.topic_id', 'is', null), eb.exists(eb.selectFrom('topics').select('topics.id').whereRef('topics.id', '=', 'broadcasts.topic_id'))]),
    eb.or([eb('broadcasts.html', '<>', ''), eb('broadcasts.text', '<>', '')]),
  ]);

export class BroadcastStore {
  private readonly byId;

  constructor(
    private readonly db: Kysely<Tables>,
    private readonly events: EventStore,
  ) {
    this.byId = prepared(this.db, (slot) => this.db.selectFrom('broadcasts').selectAll().where('id', '=', slot('id')));
  }

  async insert(record: Insertable<BroadcastTable>): Promise<void> {
    await this.db.insertInto('broadcasts').values(record).execute();
  }

  /** Inserts a draft and sends it in one transaction: refused, nothing is stored. */
  async insertAndSend(record: Insertable<BroadcastTable>, scheduledAt: string | null): Promise<Refusal | undefined> {
    try {
      await this.db.transaction().execute(async (tx) => {
        await tx.insertInto('broadcasts').values(record).execute();
        const refusal = await this.send(record.id, scheduledAt, tx);
        if (refusal) throw new Refused(refusal);
      });
    } catch (error) {
      if (error instanceof Refused) return error.refusal;
      throw error;
    }
    return undefined;
  }

  /** The status of each of these broadcasts that exists, read now: all of a sending broadcast that can still change. */
  async statuses(ids: string[]): Promise<Map<string, BroadcastStatus>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db.selectFrom('broadcasts').select(['id', 'status']).where('id', 'in', ids).execute();
    return new Map(rows.map((row) => [row.id, row.status]));
  }

  async find(id: string): Promise<BroadcastRecord | undefined> {
    return (await this.byId({ id }))[0];
  }

  /** Changes a draft; with no changes, answers as a change would (unknown, or not a draft). */
  async update(id: string, changes: BroadcastChanges): Promise<Refusal | undefined> {
    const given = Object.values(changes).some((value) => value !== undefined);
    const updated = await this.db
      .updateTable('broadcasts')
      .set(given ? changes : (eb) => ({ status: eb.ref('status') }))
      .where('id', '=', id)
      .where('status', '=', 'draft')
      .returning('id')
      .executeTakeFirst();
    return updated ? undefined : this.refusal(id, this.db);
  }

  /**
   * Deletes a draft, or a scheduled broadcast, which then never goes out (as Resend's delete does). A
   * scheduled one has no emails yet: the fan-out makes it `queued` in the same statement that claims it.
   */
  async delete(id: string): Promise<Refusal | undefined> {
    const deleted = await this.db.deleteFrom('broadcasts').where('id', '=', id).where('status', 'in', ['draft', 'scheduled']).returning('id').executeTakeFirst();
    return deleted ? undefined : this.refusal(id, this.db);
  }

  /** Sends a draft: `scheduled` for `scheduledAt`, or `queued` now when it is null. */
  async send(id: string, scheduledAt: string | null, db: Db = this.db): Promise<Refusal | undefined> {
    const updated = await db
      .updateTable('broadcasts')
      .set(scheduledAt ? { status: 'scheduled', scheduled_at: scheduledAt } : { status: 'queued', scheduled_at: null })
      .where('id', '=', id)
      .where(sendable)
      .returning('id')
      .executeTakeFirst();
    return updated ? undefined : this.refusal(id, db, 'send');
  }

  /**
   * Cancels a scheduled or queued broadcast, as Resend's cancel does. A scheduled one, which has no
   * emails yet, goes back to `draft`, to be changed and sent again. A queued one ends `canceled`, and
   * with it its emails still waiting in the outbox and held by no delivery. On PostgreSQL the status
   * change waits for a fan-out chunk in progress (it holds the row), and the chunk after it sees
   * `canceled` and stops; the emails of that chunk are committed by then, so they are canceled here
   * too, each with its `email.canceled` event.
   *
   * On PostgreSQL each statement sees what was committed before it began: a send committed between the
   * two moves (a draft becoming `scheduled`) is missed by both, and the broadcast is cancelable when
   * the refusal looks. The cancel is then made again, rather than refused for a state that allows it.
   */
  async cancel(id: string, now: Date): Promise<Refusal | undefined> {
    for (let attempt = 1; ; attempt++) {
      const refusal = await this.cancelOnce(id, now);
      if (attempt === 3 || refusal?.refused !== 'status' || !['scheduled', 'queued'].includes(refusal.status)) return refusal;
    }
  }

  private async cancelOnce(id: string, now: Date): Promise<Refusal | undefined> {
    const at = now.toISOString();
    try {
      await this.db.transaction().execute(async (tx) => {
        const unscheduled = await tx.updateTable('broadcasts').set({ status: 'draft', scheduled_at: null }).where('id', '=', id).where('status', '=', 'scheduled').returning('id').executeTakeFirst();
        if (unscheduled) return;
        const canceled = await tx
          .updateTable('broadcasts')
          .set({ status: 'canceled', lease_token: null, lease_expires_at: null })
          .where('id', '=', id)
          .where('status', '=', 'queued')
          .returning('id')
          .executeTakeFirst();
        if (!canceled) throw new Refused(await this.refusal(id, tx));
        const emails = await tx
          .updateTable('emails')
          .set({ last_event: 'canceled', updated_at: at, lease_token: null })
          .where('broadcast_id', '=', id)
          .where('last_event', 'in', PENDING)
          .where((eb) => eb.or([eb('lease_token', 'is', null), eb('next_attempt_at', '<=', at)]))
          .returning('id')
          .execute();
        const data = { reason: 'the broadcast was canceled' };
        await this.events.record(tx, emails.map((email) => ({ type: 'email.canceled' as const, email_id: email.id, data, created_at: at })));
      });
    } catch (error) {
      if (error instanceof Refused) return error.refusal;
      throw error;
    }
    return undefined;
  }

  /** One page of at most `limit` broadcasts, newest first, with `hasMore` exact in the direction of travel. */
  page(limit: number, cursor: Cursor): Promise<Page<ListedBroadcast>> {
    return keysetPage(this.db.selectFrom('broadcasts').select(LISTED), this.order, limit, cursor);
  }

  /** Every broadcast beyond the cursor, newest first, in keyset chunks. */
  stream(cursor: Cursor): AsyncGenerator<ListedBroadcast> {
    return keysetStream(this.db.selectFrom('broadcasts').select(LISTED), this.order, cursor, (b) => [b.created_at, b.id]);
  }

  /** Over broadcasts_newest_first; a cursor is a broadcast. */
  private readonly order: Order = {
    time: 'created_at',
    id: 'id',
    position: (id) => this.db.selectFrom('broadcasts').select(['created_at as time', 'id']).where('id', '=', id).executeTakeFirst(),
  };

  /** Why a move did not happen: the broadcast is missing or in another status, or (a send) cannot go. */
  private async refusal(id: string, db: Db, move?: 'send'): Promise<Refusal> {
    const record = await db.selectFrom('broadcasts').select(['status', 'segment_id', 'topic_id', 'html', 'text']).where('id', '=', id).executeTakeFirst();
    if (!record) return { refused: 'not_found' };
    if (record.status !== 'draft' || move !== 'send') return { refused: 'status', status: record.status };
    const segment = await db.selectFrom('segments').select('id').where('id', '=', record.segment_id).executeTakeFirst();
    if (!segment) return { refused: 'segment', segmentId: record.segment_id };
    if (record.topic_id !== null && !(await db.selectFrom('topics').select('id').where('id', '=', record.topic_id).executeTakeFirst())) {
      return { refused: 'topic', topicId: record.topic_id };
    }
    if (!record.html && !record.text) return { refused: 'body' };
    // Sendable now: it changed between the move and this look; the caller's move lost the race.
    return { refused: 'status', status: record.status };
  }
}

/**
 * Refuses (InUseByBroadcast) the deletion of a segment or topic that a broadcast still to go out,
 * scheduled or being sent, is addressed to: it would go out to nobody, or to part of its audience.
 */
export async function refuseWhileAddressed(tx: Transaction<Tables>, what: InUseByBroadcast['what'], id: string): Promise<void> {
  const waiting = await tx
    .selectFrom('broadcasts')
    .select(['id', 'status'])
    .where(what === 'segment' ? 'segment_id' : 'topic_id', '=', id)
    .where('status', 'in', ['scheduled', 'queued'])
    .orderBy('created_at')
    .limit(1)
    .executeTakeFirst();
  if (waiting) throw new InUseByBroadcast(what, waiting.id, waiting.status);
  // A broadcast `sent` has all its emails in the outbox, not necessarily gone out: each is checked
  // against the segment and topic as it goes, and the memberships deleted here would cancel it.
  const goingOut = await tx
    .selectFrom('emails')
    .select('broadcast_id')
    .where('last_event', 'in', PENDING)
    .where('broadcast_id', 'in', (eb) => eb.selectFrom('broadcasts').select('id').where(what === 'segment' ? 'segment_id' : 'topic_id', '=', id).where('status', '=', 'sent'))
    .limit(1)
    .executeTakeFirst();
  if (goingOut) throw new InUseByBroadcast(what, goingOut.broadcast_id!, 'going out');
}
