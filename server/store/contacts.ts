// Contacts, newest first, paged by keyset on (created_at, id) over the contacts_newest_first index.
// Creating, changing and deleting one records its event in the same transaction.
import type { Kysely, Selectable, Transaction, Updateable } from 'kysely';
import { isUniqueViolation, type ContactTable, type Database, type DialectName, type EventType, type Tables } from './database.ts';
import type { EventStore, NewEvent } from './events.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';
import { shared } from './locks.ts';
import { AddressTaken } from './missing.ts';
import { addMemberships, requireSegments } from './segments.ts';
import { requireTopics, saveChoices, type TopicChoice } from './topics.ts';

export { UnknownCursor, type Cursor } from './keyset.ts';

export type ContactRecord = Selectable<ContactTable>;
/** What listing needs: fewer columns read is measurably faster on long pages. */
export type ListedContact = Omit<ContactRecord, 'email_key' | 'updated_at'>;
export const LISTED = ['id', 'email', 'first_name', 'last_name', 'unsubscribed', 'properties', 'created_at'] as const;
export type ContactChanges = Omit<Updateable<ContactTable>, 'id' | 'email_key' | 'created_at'>;
/** How a path names a contact: by id, or by its lower-cased email. */
export type ContactKey = ['id' | 'email_key', string];

/** What a new contact joins as it is created: segments by id, and its own topic choices. */
export interface Joins {
  segments: string[];
  topics: TopicChoice[];
  /** Whether a contact that exists already joins them too (the legacy audience route), or stays as it is. */
  existingJoins?: boolean;
}

/** Within `tx`: the contact, kept from being deleted until `tx` ends (see locks.ts), or undefined. */
export function lockContact(tx: Transaction<Tables>, dialect: DialectName, [by, value]: ContactKey): Promise<ContactRecord | undefined> {
  return shared(tx.selectFrom('contacts').selectAll().where(by, '=', value), dialect).executeTakeFirst();
}

export class ContactStore {
  private readonly db: Kysely<Tables>;
  /** Contacts in (created_at, id) order, as contacts_newest_first holds them. */
  private readonly order: Order;

  constructor(
    private readonly database: Database,
    private readonly events: EventStore,
  ) {
    this.db = database.db;
    this.order = { time: 'created_at', id: 'id', position: contactPosition(database.db) };
  }

  /**
   * Inserts the contact unless its email exists; returns the stored contact and whether it is new. With
   * `joins`, all in one transaction: every segment and topic named must exist (else UnknownReference,
   * and nothing is kept), and the new contact joins them.
   */
  async insertUnlessExists(record: ContactRecord, joins?: Joins): Promise<{ record: ContactRecord; created: boolean }> {
    return this.db.transaction().execute(async (tx) => {
      if (!joins) {
        const found = await insertOrFind(tx, record);
        if (found.created) await this.events.record(tx, [contactEvent('contact.created', found.record, [], record.created_at)]);
        return found;
      }
      await requireSegments(tx, this.database.dialect, joins.segments);
      await requireTopics(tx, this.database.dialect, joins.topics.map((choice) => choice.id));
      const found = await insertOrFind(tx, record, this.database.dialect);
      if (found.created || joins.existingJoins) {
        await addMemberships(tx, found.record, joins.segments, record.created_at);
        await saveChoices(tx, found.record.id, joins.topics, record.created_at);
      }
      // Created with its memberships and choices: the event goes out with the contact complete.
      if (found.created) await this.events.record(tx, [contactEvent('contact.created', found.record, await segmentsOf(tx, found.record.id), record.created_at)]);
      return found;
    });
  }

  /** Finds a contact by id, or by its lower-cased email when `by` says so. */
  find(by: 'id' | 'email_key', value: string): Promise<ContactRecord | undefined> {
    return this.db.selectFrom('contacts').selectAll().where(by, '=', value).executeTakeFirst();
  }

  /**
   * Read-modify-write: `change` sees the stored contact and returns what to set. Concurrent updates of
   * one contact take turns, each seeing the one before: on PostgreSQL the row is locked as it is read;
   * on SQLite the transaction holds the write lock from its start (see database.ts).
   */
  async update(by: 'id' | 'email_key', value: string, change: (current: ContactRecord) => ContactChanges): Promise<ContactRecord | undefined> {
    return this.db.transaction().execute(async (tx) => {
      const read = tx.selectFrom('contacts').selectAll().where(by, '=', value);
      const current = await (this.database.dialect === 'postgres' ? read.forUpdate() : read).executeTakeFirst();
      if (!current) return undefined;
      const changes = change(current);
      // The address is found by its lower-cased key, which the unique index keeps to one contact.
      const key = changes.email === undefined ? {} : { email_key: changes.email.toLowerCase() };
      const updated = await tx
        .updateTable('contacts')
        .set({ ...changes, ...key })
        .where('id', '=', current.id)
        .returningAll()
        .executeTakeFirstOrThrow()
        .catch((error: unknown) => {
          throw isUniqueViolation(error) ? new AddressTaken(changes.email!) : error;
        });
      await this.events.record(tx, [contactEvent('contact.updated', updated, await segmentsOf(tx, updated.id), updated.updated_at)]);
      return updated;
    });
  }

  /** Deletes the contact with its memberships and topic choices; returns its id, or undefined if there was none. */
  async delete(by: 'id' | 'email_key', value: string, at = new Date()): Promise<string | undefined> {
    return this.db.transaction().execute(async (tx) => {
      // The contact first: on PostgreSQL that waits for any transaction holding it FOR SHARE to add its
      // membership, which the next statements then see and delete.
      const deleted = await tx.deleteFrom('contacts').where(by, '=', value).returningAll().executeTakeFirst();
      if (!deleted) return undefined;
      // The event before the memberships go: it names the segments the contact was in.
      await this.events.record(tx, [contactEvent('contact.deleted', deleted, await segmentsOf(tx, deleted.id), at.toISOString())]);
      await tx.deleteFrom('segment_contacts').where('contact_id', '=', deleted.id).execute();
      await tx.deleteFrom('contact_topics').where('contact_id', '=', deleted.id).execute();
      return deleted.id;
    });
  }

  /** One page of at most `limit` contacts, newest first, with `hasMore` exact in the direction of travel. */
  page(limit: number, cursor: Cursor): Promise<Page<ListedContact>> {
    return keysetPage(this.db.selectFrom('contacts').select(LISTED), this.order, limit, cursor);
  }

  /** Every contact beyond the cursor, newest first, in keyset chunks (see keysetStream). */
  stream(cursor: Cursor): AsyncGenerator<ListedContact> {
    return keysetStream(this.db.selectFrom('contacts').select(LISTED), this.order, cursor, contactKeyset);
  }

}

/** Where a contact sits in newest-first order: any contact is a cursor of the contact list. */
export function contactPosition(db: Kysely<Tables>): Order['position'] {
  return async (id) => {
    const at = await db.selectFrom('contacts').select(['created_at', 'id']).where('id', '=', id).executeTakeFirst();
    return at && { time: at.created_at, id: at.id };
  };
}

/**
 * A contact's event: the contact as the change left it (as it was, for a deletion), in the fields a
 * webhook's `data` carries, with the segments it is in (segmentsOf).
 */
export function contactEvent(type: Extract<EventType, `contact.${string}`>, contact: ContactRecord, segment_ids: string[], created_at: string): NewEvent {
  const { id, email, first_name, last_name, unsubscribed, updated_at } = contact;
  const data = { id, email, first_name, last_name, unsubscribed: Boolean(unsubscribed), segment_ids, created_at: contact.created_at, updated_at };
  return { type, contact_id: id, data, created_at };
}

/** The segments the contact is in as `tx` sees them, in the order it joined them. */
export async function segmentsOf(tx: Kysely<Tables>, contactId: string): Promise<string[]> {
  const rows = await tx.selectFrom('segment_contacts').select('segment_id').where('contact_id', '=', contactId).orderBy('created_at').orderBy('segment_id').execute();
  return rows.map((row) => row.segment_id);
}

/** A listed contact's place in newest-first order. */
export const contactKeyset = (contact: ListedContact): [string, string] => [contact.created_at, contact.id];

/**
 * Inserts the contact, or finds the one holding its email. Inside a transaction on PostgreSQL the row
 * found is locked FOR SHARE (`dialect`), so that what the transaction adds to it cannot be orphaned.
 */
async function insertOrFind(db: Kysely<Tables>, record: ContactRecord, dialect?: DialectName): Promise<{ record: ContactRecord; created: boolean }> {
  for (;;) {
    const inserted = await db
      .insertInto('contacts')
      .values(record)
      .onConflict((oc) => oc.column('email_key').doNothing())
      .returningAll()
      .executeTakeFirst();
    if (inserted) return { record: inserted, created: true };
    const read = db.selectFrom('contacts').selectAll().where('email_key', '=', record.email_key);
    const existing = await (dialect ? shared(read, dialect) : read).executeTakeFirst();
    if (existing) return { record: existing, created: false };
    // Deleted between the two statements: the email is free again, so try the insert once more.
  }
}
