// The webhook outbox: one row per event owed to a webhook, written with the event (store/events.ts).
// Workers claim due rows as the email outbox does (store/emails.ts), under the same lease rules
// (store/leases.ts): the claim pushes next_attempt_at forward by a lease and sets a token of its own,
// so a worker that dies gives its rows back when the lease runs out (delivery is at least once), and an
// outcome is recorded only by the claim that holds the row, only while it is pending. On PostgreSQL
// claims skip rows other workers hold.
import { sql, type Kysely, type Selectable, type SqlBool } from 'kysely';
import { inIndexOrder, type DialectName, type EmailTable, type EventTable, type Tables, type WebhookDeliveryTable, type WebhookTable } from './database.ts';
import { webhookMessageIdsAt } from './events.ts';
import { keysetPage, type Cursor, type Order, type Page } from './keyset.ts';
import { heldBy, newLease, type LeaseRules } from './leases.ts';
import { keptText } from './outsideText.ts';
import { dropOwed } from './webhooks.ts';

export type ClaimedDelivery = Selectable<WebhookDeliveryTable> & { lease_token: string };
export type Lease = Pick<ClaimedDelivery, 'id' | 'lease_token'>;

/** What posting a claimed delivery needs: its webhook (gone, when deleted since), its event, and the email the event is about. */
export interface DeliveryContext {
  webhook: { endpoint: string; status: WebhookTable['status']; signing_secret: string; previous_signing_secret: string | null; previous_secret_expires_at: string | null } | undefined;
  event: Pick<EventTable, 'type' | 'email_id' | 'contact_id' | 'data' | 'created_at'>;
  email: Pick<Selectable<EmailTable>, 'id' | 'from_address' | 'to_addresses' | 'subject' | 'created_at' | 'broadcast_id' | 'tags' | 'headers' | 'message_id'> | undefined;
}

/** A delivery as the webhook's event log shows it. */
export type LoggedDelivery = Pick<Selectable<WebhookDeliveryTable>, 'id' | 'state' | 'attempts' | 'created_at'> & { type: EventTable['type'] };

export type DeliveryOutcome = Lease & { status: number | null } & (
    | { state: 'delivered' }
    | { state: 'pending'; error: string; retryAt: Date }
    | { state: 'failed'; error: string }
  );

/** The outbox's leases (store/leases.ts): a delivery is open while it is pending, and its lease ends when it comes due again. */
const LEASES: LeaseRules = { table: 'webhook_deliveries', endsAt: 'next_attempt_at', open: sql<SqlBool>`state = ${'pending'}` };

export class WebhookDeliveryStore {
  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
  ) {}

  /** SQLite: the ids of up to `limit` due deliveries to the webhook, oldest due first. */
  dueDeliveries(webhookId: string, limit: number, now: Date) {
    return this.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('webhook_id', '=', webhookId)
      .where('state', '=', 'pending')
      .where('next_attempt_at', '<=', now.toISOString())
      .orderBy('next_attempt_at')
      .limit(limit);
  }

  /**
   * PostgreSQL: the ids of up to `limits.get(id)` due deliveries of each webhook, oldest due first, in
   * one query that locks them and skips the rows other workers hold: one statement a claim, however
   * many webhooks there are.
   */
  dueDeliveriesOf(limits: Map<string, number>, now: Date) {
    const wanted = sql.join([...limits].map(([webhookId, limit]) => sql`(${webhookId}::text, ${limit}::int)`));
    return this.db
      .selectFrom(sql<{ webhook_id: string; n: number }>`(values ${wanted})`.as<'w'>(sql`w(webhook_id, n)`))
      .innerJoinLateral(
        (eb) =>
          eb
            .selectFrom('webhook_deliveries')
            .select('id')
            .whereRef('webhook_deliveries.webhook_id', '=', 'w.webhook_id')
            .where('state', '=', 'pending')
            .where('next_attempt_at', '<=', now.toISOString())
            .orderBy('next_attempt_at')
            .limit(sql<number>`w.n`)
            .forUpdate()
            .skipLocked()
            .as('owed'),
        (join) => join.onTrue(),
      )
      .select('owed.id');
  }

  /** One page of a webhook's deliveries, newest first, each with its event's type. */
  page(webhookId: string, limit: number, cursor: Cursor): Promise<Page<LoggedDelivery>> {
    const order: Order = {
      time: 'd.created_at',
      id: 'd.id',
      position: (id) => this.db.selectFrom('webhook_deliveries').select(['created_at as time', 'id']).where('webhook_id', '=', webhookId).where('id', '=', id).executeTakeFirst(),
    };
    const query = this.db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .select(['d.id', 'd.state', 'd.attempts', 'd.created_at', 'e.type'])
      .where('d.webhook_id', '=', webhookId);
    return keysetPage(query, order, limit, cursor);
  }

  /** A delivery of the webhook, or undefined. */
  find(webhookId: string, id: string) {
    return this.db.selectFrom('webhook_deliveries').selectAll().where('webhook_id', '=', webhookId).where('id', '=', id).executeTakeFirst();
  }

  /**
   * Makes a delivery of the webhook due now, whatever its state; returns whether there was one. One
   * that had ended (delivered, or failed for good) starts over, its attempts counted from none, so that
   * a replay that fails is retried on the usual schedule; one still pending keeps its count. A post in
   * flight under an earlier claim can no longer record its outcome: the next claim posts it again.
   */
  async replay(webhookId: string, id: string, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        state: 'pending',
        next_attempt_at: at.toISOString(),
        lease_token: null,
        attempts: eb.case().when('state', '=', 'pending').then(eb.ref('attempts')).else(0).end(),
        updated_at: at.toISOString(),
      }))
      .where('webhook_id', '=', webhookId)
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /**
   * Claims due deliveries for `leaseMs`, up to `limits.get(id)` of each webhook's, oldest due first;
   * each claim counts as an attempt.
   */
  async claimDue(limits: Map<string, number>, now: Date, leaseMs: number): Promise<ClaimedDelivery[]> {
    if (limits.size === 0) return [];
    const { lease_token, ends } = newLease(now, leaseMs);
    const claim = { next_attempt_at: ends, lease_token };
    if (this.dialect === 'postgres') {
      // Materialized, as in store/fanout.ts: as `id IN (subquery)` PostgreSQL may run the subquery once
      // per row it updates, each run skipping the rows the last one locked, and claim far past the limits.
      const claimed = await inIndexOrder(this.db, (tx) =>
        tx
          .with((cte) => cte('due').materialized(), () => this.dueDeliveriesOf(limits, now))
          .updateTable('webhook_deliveries')
          .from('due')
          .set((eb) => ({ ...claim, attempts: eb('webhook_deliveries.attempts', '+', 1) }))
          .whereRef('webhook_deliveries.id', '=', 'due.id')
          .returningAll('webhook_deliveries')
          .execute(),
      );
      return claimed as ClaimedDelivery[];
    }
    // SQLite runs each statement under its one write lock: one a webhook, in one transaction when more.
    const claimEach = async (tx: Kysely<Tables>) => {
      const claimed: ClaimedDelivery[] = [];
      for (const [webhookId, limit] of limits) {
        const rows = await tx
          .updateTable('webhook_deliveries')
          .set((eb) => ({ ...claim, attempts: eb('attempts', '+', 1) }))
          .where('id', 'in', this.dueDeliveries(webhookId, limit, now))
          .where('state', '=', 'pending')
          .returningAll()
          .execute();
        claimed.push(...(rows as ClaimedDelivery[]));
      }
      return claimed;
    };
    return limits.size === 1 ? claimEach(this.db) : this.db.transaction().execute(claimEach);
  }

  /**
   * Drops deliveries still pending for a webhook that is gone or no longer enabled: claims take only
   * enabled webhooks' deliveries, and an event recorded as its webhook was disabled can leave one.
   */
  async dropUnowed(): Promise<number> {
    const result = await this.db
      .deleteFrom('webhook_deliveries')
      .where('state', '=', 'pending')
      .where('webhook_id', 'not in', (eb) => eb.selectFrom('webhooks').select('id').where('status', '=', 'enabled'))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** What each claimed delivery needs to be posted, by delivery id, in one query. */
  async contextOf(ids: string[]): Promise<Map<string, DeliveryContext>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .leftJoin('webhooks as w', 'w.id', 'd.webhook_id')
      .leftJoin('emails as m', 'm.id', 'e.email_id')
      .select([
        'd.id', 'w.endpoint', 'w.signing_secret', 'w.previous_signing_secret', 'w.previous_secret_expires_at', 'w.status',
        'e.type', 'e.email_id', 'e.contact_id', 'e.data', 'e.created_at as event_created_at',
        'm.id as email_id_found', 'm.from_address', 'm.to_addresses', 'm.subject', 'm.created_at as email_created_at', 'm.broadcast_id', 'm.tags', 'm.headers', 'm.message_id',
      ])
      .where('d.id', 'in', ids)
      .execute();
    return new Map(
      rows.map((r) => [
        r.id,
        {
          webhook:
            r.endpoint === null
              ? undefined
              : { endpoint: r.endpoint, status: r.status!, signing_secret: r.signing_secret!, previous_signing_secret: r.previous_signing_secret, previous_secret_expires_at: r.previous_secret_expires_at },
          event: { type: r.type, email_id: r.email_id, contact_id: r.contact_id, data: r.data, created_at: r.event_created_at },
          email:
            r.email_id_found === null
              ? undefined
              : { id: r.email_id_found, from_address: r.from_address!, to_addresses: r.to_addresses!, subject: r.subject!, created_at: r.email_created_at!, broadcast_id: r.broadcast_id, tags: r.tags, headers: r.headers, message_id: r.message_id },
        },
      ]),
    );
  }

  /**
   * Records outcomes atomically, each only if its lease still holds; returns the ids recorded.
   * The deliveries of one claim share its lease token, so those delivered with the same status are
   * recorded by one statement.
   */
  async record(outcomes: DeliveryOutcome[], at: Date): Promise<string[]> {
    if (outcomes.length === 0) return [];
    const updated_at = at.toISOString();
    const delivered = new Map<string, { lease_token: string; status: number | null; ids: string[] }>();
    const others: Exclude<DeliveryOutcome, { state: 'delivered' }>[] = [];
    for (const outcome of outcomes) {
      if (outcome.state !== 'delivered') {
        others.push(outcome);
        continue;
      }
      const key = `${outcome.lease_token} ${outcome.status}`;
      const same = delivered.get(key) ?? delivered.set(key, { lease_token: outcome.lease_token, status: outcome.status, ids: [] }).get(key)!;
      same.ids.push(outcome.id);
    }
    // Ids 1,000 a statement at most: SQLite binds 32,766 values.
    const statements = [...delivered.values()].flatMap(({ lease_token, status, ids }) =>
      Array.from({ length: Math.ceil(ids.length / 1000) }, (_, i) => ({ lease_token, status, ids: ids.slice(i * 1000, (i + 1) * 1000) })),
    );
    const markDelivered = async (tx: Kysely<Tables>, { lease_token, status, ids }: (typeof statements)[number]) => {
      const rows = await tx
        .updateTable('webhook_deliveries')
        .set({ state: 'delivered', last_status: status, last_error: null, lease_token: null, updated_at })
        .where(heldBy(LEASES, ids, lease_token))
        .returning('id')
        .execute();
      return rows.map((row) => row.id);
    };
    // The usual case, every answer of one claim a success, is one statement, which needs no
    // transaction around it: on PostgreSQL two round trips fewer.
    if (statements.length === 1 && others.length === 0) return markDelivered(this.db, statements[0]!);
    return this.db.transaction().execute(async (tx) => {
      const recorded: string[] = [];
      for (const statement of statements) recorded.push(...(await markDelivered(tx, statement)));
      for (const outcome of others) {
        const common = { last_status: outcome.status, last_error: keptText(outcome.error), lease_token: null, updated_at };
        const set = outcome.state === 'pending' ? { ...common, next_attempt_at: outcome.retryAt.toISOString() } : { ...common, state: 'failed' as const };
        const row = await tx
          .updateTable('webhook_deliveries')
          .set(set)
          .where(heldBy(LEASES, outcome.id, outcome.lease_token))
          .returning('id')
          .executeTakeFirst();
        if (row) recorded.push(row.id);
      }
      return recorded;
    });
  }

  /**
   * Deletes up to `limit` deliveries that have ended (delivered or failed) and were made before
   * `before`; returns how many. A delivery's id begins with the time it was made (store/events.ts),
   * so the primary key finds them, without an index of its own that every outcome would update.
   */
  async purgeEnded(before: Date, limit = 10_000): Promise<number> {
    const ended = this.db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('id', '<', webhookMessageIdsAt(before.getTime()))
      .where('state', '<>', 'pending')
      .orderBy('id')
      .limit(limit);
    const result = await this.db.deleteFrom('webhook_deliveries').where('id', 'in', ended).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Drops claimed deliveries that are no longer owed (their webhook was deleted or disabled meanwhile). */
  async discard(leases: Lease[]): Promise<void> {
    for (const { id, lease_token } of leases) {
      await this.db.deleteFrom('webhook_deliveries').where(heldBy(LEASES, id, lease_token)).execute();
    }
  }

  /**
   * Disables the webhook, and drops what it is still owed, when its `threshold` latest deliveries to
   * end have all failed every attempt, none succeeding since the first of them ended, all since the
   * webhook was last changed (enabling it again, or giving it another endpoint, starts the count
   * afresh). Returns whether it did.
   */
  async disableIfFailing(webhookId: string, threshold: number, reason: string, at: Date): Promise<boolean> {
    if (threshold <= 0) return false;
    return this.db.transaction().execute(async (tx) => {
      const read = tx.selectFrom('webhooks').select('updated_at').where('id', '=', webhookId).where('status', '=', 'enabled');
      const webhook = await (this.dialect === 'postgres' ? read.forUpdate() : read).executeTakeFirst();
      if (!webhook) return false;
      const failed = await tx
        .selectFrom('webhook_deliveries')
        .select('updated_at')
        .where('webhook_id', '=', webhookId)
        .where('state', '=', 'failed')
        .where('updated_at', '>=', webhook.updated_at)
        .orderBy('updated_at', 'desc')
        .limit(threshold)
        .execute();
      if (failed.length < threshold) return false;
      const since = failed.at(-1)!.updated_at;
      const succeeded = await tx
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('webhook_id', '=', webhookId)
        .where('state', '=', 'delivered')
        .where('updated_at', '>=', since)
        .limit(1)
        .executeTakeFirst();
      if (succeeded) return false;
      await tx.updateTable('webhooks').set({ status: 'disabled', status_reason: reason, updated_at: at.toISOString() }).where('id', '=', webhookId).execute();
      await dropOwed(tx, webhookId);
      return true;
    });
  }
}
