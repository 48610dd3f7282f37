// The suppression list: addresses no email is sent to, one row per lower-cased address, newest first
// over suppressions_newest_first. Bounces and complaints add to it inside the transaction that records
// them (suppress()); the API adds and removes by hand.
import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { SuppressionTable, Tables } from './database.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';

export type SuppressionRecord = Selectable<SuppressionTable>;
export type SuppressionOrigin = SuppressionTable['origin'];
/** How a path names a suppression: by id, or by its lower-cased address. */
export type SuppressionKey = ['id' | 'email_key', string];

/** What an address needs to be suppressed: the address, and why. */
export interface NewSuppression {
  email: string;
  origin: SuppressionOrigin;
  source_id: string | null;
}

/** The suppressions a bounce of email `emailId` adds: each address it names, with the email as the source. */
export const bounceSuppressions = (emailId: string, addresses: string[]): NewSuppression[] => addresses.map((email) => ({ email, origin: 'bounce', source_id: emailId }));

/**
 * Within `tx`: suppresses every address not suppressed already. An address already on the list keeps
 * its first origin: the earliest reason is the one an operator needs to see.
 */
export async function suppress(tx: Transaction<Tables> | Kysely<Tables>, entries: NewSuppression[], at: string): Promise<void> {
  if (entries.length === 0) return;
  const rows = entries.map((entry) => ({ id: randomUUID(), email: entry.email, email_key: entry.email.toLowerCase(), origin: entry.origin, source_id: entry.source_id, created_at: at }));
  await tx.insertInto('suppressions').values(rows).onConflict((oc) => oc.column('email_key').doNothing()).execute();
}

export class SuppressionStore {
  private readonly order: Order;

  constructor(private readonly db: Kysely<Tables>) {
    this.order = {
      time: 'created_at',
      id: 'id',
      position: async (id) => {
        const at = await this.db.selectFrom('suppressions').select(['created_at', 'id']).where('id', '=', id).executeTakeFirst();
        return at && { time: at.created_at, id: at.id };
      },
    };
  }

  /**
   * Suppresses each address by hand, in one transaction; returns each one's suppression in the order
   * given (an address on the list already keeps its own) and which of them this call created.
   */
  async add(emails: string[]): Promise<{ record: SuppressionRecord; created: boolean }[]> {
    const at = new Date().toISOString();
    return this.db.transaction().execute(async (tx) => {
      const keys = [...new Set(emails.map((email) => email.toLowerCase()))];
      const fresh = keys.map((key) => ({ id: randomUUID(), email: emails.find((email) => email.toLowerCase() === key)!, email_key: key, origin: 'manual' as const, source_id: null, created_at: at }));
      const byKey = new Map<string, SuppressionRecord>();
      const created = new Set<string>();
      // An address whose row another request deletes between the insert and the read is free again:
      // it is inserted on the next round, as contacts are (store/contacts.ts).
      for (let pending = keys; pending.length > 0; pending = pending.filter((key) => !byKey.has(key))) {
        const rows = fresh.filter((row) => pending.includes(row.email_key));
        for (const row of await tx.insertInto('suppressions').values(rows).onConflict((oc) => oc.column('email_key').doNothing()).returningAll().execute()) {
          byKey.set(row.email_key, row);
          created.add(row.id);
        }
        const existing = pending.filter((key) => !byKey.has(key));
        if (existing.length > 0) for (const row of await tx.selectFrom('suppressions').selectAll().where('email_key', 'in', existing).execute()) byKey.set(row.email_key, row);
      }
      const seen = new Set<string>();
      return emails.map((email) => {
        const record = byKey.get(email.toLowerCase())!;
        const first = created.has(record.id) && !seen.has(record.id);
        seen.add(record.id);
        return { record, created: first };
      });
    });
  }

  find([by, value]: SuppressionKey): Promise<SuppressionRecord | undefined> {
    return this.db.selectFrom('suppressions').selectAll().where(by, '=', value).executeTakeFirst();
  }

  /** One page of suppressions newest first, of one origin if given. */
  page(origin: SuppressionOrigin | undefined, limit: number, cursor: Cursor): Promise<Page<SuppressionRecord>> {
    return keysetPage(this.ofOrigin(origin), this.order, limit, cursor);
  }

  /** Every suppression beyond the cursor, newest first, of one origin if given, in keyset chunks. */
  stream(origin: SuppressionOrigin | undefined, cursor: Cursor): AsyncGenerator<SuppressionRecord> {
    return keysetStream(this.ofOrigin(origin), this.order, cursor, (s) => [s.created_at, s.id]);
  }

  private ofOrigin(origin: SuppressionOrigin | undefined) {
    const query = this.db.selectFrom('suppressions').selectAll();
    return origin ? query.where('origin', '=', origin) : query;
  }

  /** Removes the suppressions named, by id or by address; returns the ids of those that were there, in the order named. */
  async remove(by: 'id' | 'email_key', values: string[]): Promise<string[]> {
    const deleted = await this.db.deleteFrom('suppressions').where(by, 'in', values).returning(['id', 'email_key']).execute();
    const byValue = new Map(deleted.map((row) => [by === 'id' ? row.id : row.email_key, row.id]));
    return [...new Set(values)].flatMap((value) => byValue.get(value) ?? []);
  }

  /** Of these lower-cased addresses, the ones suppressed, each with its origin: one query. */
  async among(keys: string[]): Promise<Map<string, SuppressionOrigin>> {
    if (keys.length === 0) return new Map();
    const found = new Map<string, SuppressionOrigin>();
    // SQLite binds at most 32,766 values a statement; a claimed batch holds far fewer recipients.
    for (let i = 0; i < keys.length; i += 10_000) {
      const rows = await this.db.selectFrom('suppressions').select(['email_key', 'origin']).where('email_key', 'in', keys.slice(i, i + 10_000)).execute();
      for (const row of rows) found.set(row.email_key, row.origin);
    }
    return found;
  }
}
