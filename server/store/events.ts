// Events: every change in an email's life (and a contact's), recorded in the transaction that makes
// the change, together with one webhook delivery per enabled webhook that asked for its type. So an
// event is never recorded without its deliveries, nor a change made without its event.
import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { EventType, Tables } from './database.ts';
import { preparedInsert } from './prepared.ts';
import { timeOrderedId } from './timeOrderedId.ts';

export interface NewEvent {
  type: EventType;
  email_id?: string | null;
  contact_id?: string | null;
  /** What the event adds, stored as JSON. */
  data?: unknown;
  created_at: string;
}

/**
 * A Standard Webhooks message id: the same on every attempt at one delivery. It starts with the time
 * in hex, so new deliveries append to the primary-key index instead of landing on random pages (fewer
 * pages written per commit, beside delivery's own); 72 random bits follow, taken from a version 4
 * UUID (node's pool) rather than a system call of their own: 18 of its hex digits, skipping the
 * version digit and the variant's.
 */
export function webhookMessageId(now = Date.now()): string {
  const hex = randomUUID().replaceAll('-', '');
  const random = Buffer.from(hex.slice(0, 12) + hex.slice(13, 16) + hex.slice(17, 20), 'hex').toString('base64url');
  return webhookMessageIdsAt(now) + random;
}

/** What every webhook message id made at `ms` starts with: ids made earlier sort below it. */
export const webhookMessageIdsAt = (ms: number) => `msg_${ms.toString(16).padStart(12, '0')}`;

export class EventStore {
  /** Compiled for this store's database; delivery records a group of events with every commit. */
  private readonly insertEvents = preparedInsert<Tables, 'events'>('events');
  private readonly insertDeliveries = preparedInsert<Tables, 'webhook_deliveries'>('webhook_deliveries');

  constructor(private readonly db: Kysely<Tables>) {}

  /** Records events and their webhook deliveries; call it inside the transaction making the change. */
  async record(tx: Transaction<Tables> | Kysely<Tables>, events: NewEvent[]): Promise<void> {
    if (events.length === 0) return;
    const rows = events.map((event) => ({
      // Time-ordered: events recorded together (`sent`, then `delivered`) keep their order by id.
      id: timeOrderedId(),
      type: event.type,
      email_id: event.email_id ?? null,
      contact_id: event.contact_id ?? null,
      data: event.data === undefined || event.data === null ? null : JSON.stringify(event.data),
      created_at: event.created_at,
    }));
    // 6 values a row: SQLite's 32,766 bound values allow 5,000 rows a statement.
    for (let i = 0; i < rows.length; i += 5000) await this.insertEvents(tx, rows.slice(i, i + 5000));
    const webhooks = await tx.selectFrom('webhooks').select(['id', 'events']).where('status', '=', 'enabled').execute();
    if (webhooks.length === 0) return;
    const wanted = webhooks.map((webhook) => ({ id: webhook.id, types: new Set(JSON.parse(webhook.events) as string[]) }));
    const deliveries = rows.flatMap((event) =>
      wanted
        .filter((webhook) => webhook.types.has(event.type))
        .map((webhook) => ({
          id: webhookMessageId(),
          webhook_id: webhook.id,
          event_id: event.id,
          state: 'pending' as const,
          attempts: 0,
          next_attempt_at: event.created_at,
          lease_token: null,
          last_status: null,
          last_error: null,
          created_at: event.created_at,
          updated_at: event.created_at,
        })),
    );
    for (let i = 0; i < deliveries.length; i += 2500) await this.insertDeliveries(tx, deliveries.slice(i, i + 2500));
  }

  /** An email's events, oldest first. */
  forEmail(emailId: string) {
    return this.db.selectFrom('events').selectAll().where('email_id', '=', emailId).orderBy('created_at').orderBy('id').execute();
  }
}
