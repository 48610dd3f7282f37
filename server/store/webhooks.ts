// Webhooks: the endpoints that receive events. Turning one off (by hand, or by the server when its
// deliveries keep failing) or deleting it drops the deliveries still owed to it, in the same
// transaction: a disabled webhook receives nothing, then or later. Changing its events drops those
// owed for the types it no longer asks for.
import type { Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';
import type { DialectName, EventType, Tables, WebhookTable } from './database.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';

export type WebhookRecord = Selectable<WebhookTable>;
export type WebhookChanges = Pick<Updateable<WebhookTable>, 'endpoint' | 'events' | 'status' | 'status_reason'>;

export class WebhookStore {
  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
  ) {}

  async insert(record: Insertable<WebhookTable>): Promise<void> {
    await this.db.insertInto('webhooks').values(record).execute();
  }

  find(id: string): Promise<WebhookRecord | undefined> {
    return this.db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The ids of the webhooks that receive events, oldest first. */
  async enabledIds(): Promise<string[]> {
    const rows = await this.db.selectFrom('webhooks').select('id').where('status', '=', 'enabled').orderBy('created_at').orderBy('id').execute();
    return rows.map((row) => row.id);
  }

  /** One page of webhooks newest first. */
  page(limit: number, cursor: Cursor): Promise<Page<WebhookRecord>> {
    return keysetPage(this.db.selectFrom('webhooks').selectAll(), this.order, limit, cursor);
  }

  /** Every webhook beyond the cursor, newest first, in keyset chunks. */
  stream(cursor: Cursor): AsyncGenerator<WebhookRecord> {
    return keysetStream(this.db.selectFrom('webhooks').selectAll(), this.order, cursor, (w) => [w.created_at, w.id]);
  }

  /**
   * Read-modify-write in one transaction: `change` sees the stored webhook (and may throw, which
   * changes nothing) and returns what to set. Returns the webhook as stored after, or undefined.
   */
  async update(id: string, change: (current: WebhookRecord) => WebhookChanges, at: Date): Promise<WebhookRecord | undefined> {
    return this.db.transaction().execute(async (tx) => {
      const read = tx.selectFrom('webhooks').selectAll().where('id', '=', id);
      const current = await (this.dialect === 'postgres' ? read.forUpdate() : read).executeTakeFirst();
      if (!current) return undefined;
      const changes = change(current);
      // updated_at also marks where the count of failing deliveries starts again (see the outbox).
      const updated = await tx.updateTable('webhooks').set({ ...changes, updated_at: at.toISOString() }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
      if (current.status === 'enabled' && updated.status === 'disabled') await dropOwed(tx, id);
      else if (updated.events !== current.events) await dropOwed(tx, id, JSON.parse(updated.events) as string[]);
      return updated;
    });
  }

  /**
   * Gives the webhook `secret` to sign with; the one it replaces signs too until `previousUntil`. A
   * secret replaced before then (a second rotation) signs no more. Undefined if there is no such webhook.
   */
  async rotateSecret(id: string, secret: string, previousUntil: Date, at: Date): Promise<WebhookRecord | undefined> {
    return this.db
      .updateTable('webhooks')
      .set((eb) => ({
        previous_signing_secret: eb.ref('signing_secret'),
        previous_secret_expires_at: previousUntil.toISOString(),
        signing_secret: secret,
        updated_at: at.toISOString(),
      }))
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Deletes the webhook and every delivery of it; false if there was no such webhook. */
  async delete(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const deleted = await tx.deleteFrom('webhooks').where('id', '=', id).returning('id').executeTakeFirst();
      if (!deleted) return false;
      await tx.deleteFrom('webhook_deliveries').where('webhook_id', '=', id).execute();
      return true;
    });
  }

  /** Over webhooks_newest_first; a cursor is a webhook. */
  private readonly order: Order = {
    time: 'created_at',
    id: 'id',
    position: async (id) => {
      const at = await this.find(id);
      return at && { time: at.created_at, id: at.id };
    },
  };
}

/**
 * Within `tx`: drops the deliveries still owed to a webhook that no longer receives anything, or,
 * given the types it still asks for, those of the types it no longer does.
 */
export async function dropOwed(tx: Transaction<Tables>, webhookId: string, keptTypes?: string[]): Promise<void> {
  let owed = tx.deleteFrom('webhook_deliveries').where('webhook_id', '=', webhookId).where('state', '=', 'pending');
  if (keptTypes) owed = owed.where('event_id', 'in', (eb) => eb.selectFrom('events').select('id').where('type', 'not in', keptTypes as EventType[]));
  await owed.execute();
}
