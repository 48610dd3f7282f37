// Sending domains: one row each, with its DKIM key and where the check of its DNS records stands.
// Every change is recorded with its `domain.*` event in one transaction; what the event carries (the
// domain with its records) is made by the caller, from the row as it is after the change.
//
// Checks are claimed like the outbox's rows: a due domain's `next_check_at` is moved a lease ahead
// by a compare-and-set, so that of several processes one checks it; the outcome is kept only while
// that claim still holds (a `verify` meanwhile asks for a fresh check, which wins).
import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import type { DialectName, DomainTable, Tables } from './database.ts';
import type { EventStore } from './events.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';

export type DomainRecord = Selectable<DomainTable>;
export type DomainChanges = Omit<Updateable<DomainTable>, 'id' | 'name' | 'created_at'>;
/** What the `domain.*` event of a change carries: the domain as the change left it. */
export type DescribeDomain = (domain: DomainRecord) => unknown;

export class DomainStore {
  /** Counts this store's changes to domains, so that what was read before one is known to be stale. */
  writes = 0;

  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
    private readonly events: EventStore,
  ) {}

  async insert(record: Insertable<DomainTable>, describe: DescribeDomain): Promise<DomainRecord> {
    return this.db.transaction().execute(async (tx) => {
      const inserted = await tx.insertInto('domains').values(record).returningAll().executeTakeFirstOrThrow();
      this.writes++;
      await this.events.record(tx, [{ type: 'domain.created', data: describe(inserted), created_at: inserted.created_at }]);
      return inserted;
    });
  }

  find(id: string): Promise<DomainRecord | undefined> {
    return this.db.selectFrom('domains').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Every domain: there are few, and senders read them all at once (server/domains/senders.ts). */
  all(): Promise<DomainRecord[]> {
    return this.db.selectFrom('domains').selectAll().execute();
  }

  /** One page of domains newest first. */
  page(limit: number, cursor: Cursor): Promise<Page<DomainRecord>> {
    return keysetPage(this.db.selectFrom('domains').selectAll(), this.order, limit, cursor);
  }

  /** Every domain beyond the cursor, newest first, in keyset chunks. */
  stream(cursor: Cursor): AsyncGenerator<DomainRecord> {
    return keysetStream(this.db.selectFrom('domains').selectAll(), this.order, cursor, (d) => [d.created_at, d.id]);
  }

  /**
   * Read-modify-write in one transaction: `change` sees the stored domain and returns what to set, or
   * undefined to leave it. `changed` says whether the result is worth a `domain.updated` event.
   * Returns the domain as stored after, or undefined if there is none.
   */
  async update(
    id: string,
    change: (current: DomainRecord) => DomainChanges | undefined,
    changed: (before: DomainRecord, after: DomainRecord) => boolean,
    describe: DescribeDomain,
    at: Date,
  ): Promise<DomainRecord | undefined> {
    return this.db.transaction().execute(async (tx) => {
      const read = tx.selectFrom('domains').selectAll().where('id', '=', id);
      const current = await (this.dialect === 'postgres' ? read.forUpdate() : read).executeTakeFirst();
      if (!current) return undefined;
      const changes = change(current);
      if (!changes) return current;
      const updated_at = at.toISOString();
      const after = await tx.updateTable('domains').set({ ...changes, updated_at }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
      this.writes++;
      if (changed(current, after)) await this.events.record(tx, [{ type: 'domain.updated', data: describe(after), created_at: updated_at }]);
      return after;
    });
  }

  /** Deletes the domain and records `domain.deleted`; false if there was none. */
  async delete(id: string, describe: DescribeDomain, at: Date): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const deleted = await tx.deleteFrom('domains').where('id', '=', id).returningAll().executeTakeFirst();
      if (!deleted) return false;
      this.writes++;
      await this.events.record(tx, [{ type: 'domain.deleted', data: describe(deleted), created_at: at.toISOString() }]);
      return true;
    });
  }

  /**
   * Claims up to `limit` domains whose check is due, each until `until`: returns them with
   * `next_check_at` set to it, which the outcome must still find (see `update`'s callers).
   */
  async claimDue(now: Date, until: Date, limit: number): Promise<DomainRecord[]> {
    const due = await this.db.selectFrom('domains').select(['id', 'next_check_at']).where('next_check_at', '<=', now.toISOString()).orderBy('next_check_at').limit(limit).execute();
    const claimed: DomainRecord[] = [];
    for (const { id, next_check_at } of due) {
      const row = await this.db
        .updateTable('domains')
        .set({ next_check_at: until.toISOString() })
        .where('id', '=', id)
        .where('next_check_at', '=', next_check_at)
        .returningAll()
        .executeTakeFirst();
      if (row) claimed.push(row);
    }
    return claimed;
  }

  /** Over domains_newest_first; a cursor is a domain. */
  private readonly order: Order = {
    time: 'created_at',
    id: 'id',
    position: async (id) => {
      const at = await this.find(id);
      return at && { time: at.created_at, id: at.id };
    },
  };
}
