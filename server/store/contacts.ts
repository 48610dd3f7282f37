// Contacts, newest first, paged by keyset on (created_at, id) over the contacts_newest_first index.
import type { Kysely, Selectable, Updateable } from 'kysely';
import type { ContactTable, Database, Tables } from './database.ts';

export type ContactRecord = Selectable<ContactTable>;
/** What listing needs: fewer columns read is measurably faster on long pages. */
export type ListedContact = Omit<ContactRecord, 'email_key' | 'updated_at'>;
const LISTED = ['id', 'email', 'first_name', 'last_name', 'unsubscribed', 'properties', 'created_at'] as const;
export type ContactChanges = Omit<Updateable<ContactTable>, 'id' | 'email' | 'email_key' | 'created_at'>;
export type Cursor = { after: string } | { before: string } | Record<string, never>;
export type Page = { records: ListedContact[]; hasMore: boolean };

/** An `after` or `before` id that names no contact. */
export class UnknownCursor extends Error {
  constructor(readonly parameter: 'after' | 'before') {
    super(`unknown ${parameter} cursor`);
  }
}

export class ContactStore {
  private readonly db: Kysely<Tables>;

  constructor(private readonly database: Database) {
    this.db = database.db;
  }

  /** Inserts the contact unless its email exists; returns the stored contact and whether it is new. */
  async insertUnlessExists(record: ContactRecord): Promise<{ record: ContactRecord; created: boolean }> {
    for (;;) {
      const inserted = await this.db
        .insertInto('contacts')
        .values(record)
        .onConflict((oc) => oc.column('email_key').doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted) return { record: inserted, created: true };
      const existing = await this.db.selectFrom('contacts').selectAll().where('email_key', '=', record.email_key).executeTakeFirst();
      if (existing) return { record: existing, created: false };
      // Deleted between the two statements: the email is free again, so try the insert once more.
    }
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
      return tx.updateTable('contacts').set(change(current)).where('id', '=', current.id).returningAll().executeTakeFirstOrThrow();
    });
  }

  async delete(by: 'id' | 'email_key', value: string): Promise<string | undefined> {
    const deleted = await this.db.deleteFrom('contacts').where(by, '=', value).returning('id').executeTakeFirst();
    return deleted?.id;
  }

  /** One page of at most `limit` contacts, newest first, with `hasMore` exact in the direction of travel. */
  async page(limit: number, cursor: Cursor): Promise<Page> {
    const query = await this.after(cursor);
    if ('before' in cursor) {
      // Walk towards newer contacts, then turn the page around to keep newest first.
      const rows = await query.orderBy('created_at', 'asc').orderBy('id', 'asc').limit(limit + 1).execute();
      return { records: rows.slice(0, limit).reverse(), hasMore: rows.length > limit };
    }
    const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
    return { records: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  /**
   * Every contact beyond the cursor, newest first, read in keyset chunks of `chunk` rows: one short
   * query per chunk, so no database connection is held while the caller (a client reading a long
   * response) takes its time, and memory holds one chunk at most.
   */
  async *stream(cursor: Cursor, chunk = 500): AsyncGenerator<ListedContact> {
    const beyondCursor = await this.after(cursor);
    let last: ListedContact | undefined;
    for (;;) {
      const from = last;
      const query = from ? beyondCursor.where((eb) => eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(from.created_at, from.id))) : beyondCursor;
      const rows = await query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(chunk).execute();
      yield* rows;
      if (rows.length < chunk) return;
      last = rows.at(-1);
    }
  }

  /** The query restricted to the contacts beyond the cursor; throws UnknownCursor if it names none. */
  private async after(cursor: Cursor) {
    const query = this.db.selectFrom('contacts').select(LISTED);
    const [parameter, id] = 'after' in cursor ? ['after' as const, cursor.after] : 'before' in cursor ? ['before' as const, cursor.before] : [];
    if (!parameter) return query;
    const at = await this.db.selectFrom('contacts').select(['created_at', 'id']).where('id', '=', id).executeTakeFirst();
    if (!at) throw new UnknownCursor(parameter);
    const direction = parameter === 'after' ? '<' : '>';
    return query.where((eb) => eb(eb.refTuple('created_at', 'id'), direction, eb.tuple(at.created_at, at.id)));
  }
}
