// Segments and their memberships (segment_contacts). A membership copies its contact's created_at, which
// never changes, so that a segment's members list newest first off segment_contacts_newest_first alone.
import type { Kysely, Selectable, Transaction } from 'kysely';
import { contactKeyset, LISTED, lockContact, type ContactKey, type ContactRecord, type ListedContact } from './contacts.ts';
import type { Database, DialectName, SegmentTable, Tables } from './database.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';
import { refuseWhileAddressed } from './broadcasts.ts';
import { shared } from './locks.ts';
import { NotFound, UnknownReference } from './missing.ts';

export type SegmentRecord = Selectable<SegmentTable>;
/** A segment as one contact's list shows it: `created_at` is when the contact joined. */
export type JoinedSegment = Pick<SegmentRecord, 'id' | 'name' | 'created_at'>;

export class SegmentStore {
  private readonly db: Kysely<Tables>;

  constructor(private readonly database: Database) {
    this.db = database.db;
  }

  async insert(record: SegmentRecord): Promise<void> {
    await this.db.insertInto('segments').values(record).execute();
  }

  find(id: string): Promise<SegmentRecord | undefined> {
    return this.db.selectFrom('segments').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Whether a segment of this id was there to rename. */
  async rename(id: string, name: string): Promise<boolean> {
    const { numUpdatedRows } = await this.db.updateTable('segments').set({ name }).where('id', '=', id).executeTakeFirst();
    return numUpdatedRows > 0n;
  }

  /** Deletes the segment and its memberships; false if there was no such segment. Refused while a broadcast still to go out is addressed to it. */
  async delete(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      // The segment first: see locks.ts.
      const deleted = await tx.deleteFrom('segments').where('id', '=', id).returning('id').executeTakeFirst();
      if (!deleted) return false;
      await refuseWhileAddressed(tx, 'segment', id);
      await tx.deleteFrom('segment_contacts').where('segment_id', '=', id).execute();
      return true;
    });
  }

  /** One page of segments newest first. */
  page(limit: number, cursor: Cursor): Promise<Page<SegmentRecord>> {
    return keysetPage(this.db.selectFrom('segments').selectAll(), this.segmentOrder, limit, cursor);
  }

  /** Every segment beyond the cursor, newest first, in keyset chunks. */
  stream(cursor: Cursor): AsyncGenerator<SegmentRecord> {
    return keysetStream(this.db.selectFrom('segments').selectAll(), this.segmentOrder, cursor, (s) => [s.created_at, s.id]);
  }

  /** One page of the segment's contacts, in the order of the whole contact list; a cursor is a member. */
  members(segmentId: string, limit: number, cursor: Cursor): Promise<Page<ListedContact>> {
    return keysetPage(this.membersOf(segmentId), this.memberOrder(segmentId), limit, cursor);
  }

  /** Every contact of the segment beyond the cursor, newest first, in keyset chunks. */
  streamMembers(segmentId: string, cursor: Cursor): AsyncGenerator<ListedContact> {
    return keysetStream(this.membersOf(segmentId), this.memberOrder(segmentId), cursor, contactKeyset);
  }

  async isMember(segmentId: string, [by, value]: ContactKey): Promise<boolean> {
    const row = await this.db
      .selectFrom('segment_contacts as sc')
      .innerJoin('contacts as c', 'c.id', 'sc.contact_id')
      .select('sc.contact_id')
      .where('sc.segment_id', '=', segmentId)
      .where(`c.${by}`, '=', value)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Adds the contact to the segment unless it is a member already; returns the contact's id. */
  async add(segmentId: string, contact: ContactKey): Promise<string> {
    return this.db.transaction().execute(async (tx) => {
      const member = await lockContact(tx, this.database.dialect, contact);
      if (!member) throw new NotFound('Contact');
      if (!(await lockSegment(tx, this.database.dialect, segmentId))) throw new NotFound('Segment');
      await addMemberships(tx, member, [segmentId], new Date().toISOString());
      return member.id;
    });
  }

  /** Takes the contact out of the segment; returns the contact's id. */
  async remove(segmentId: string, [by, value]: ContactKey): Promise<string> {
    const contact = await this.db.selectFrom('contacts').select('id').where(by, '=', value).executeTakeFirst();
    if (!contact) throw new NotFound('Contact');
    const removed = await this.db.deleteFrom('segment_contacts').where('segment_id', '=', segmentId).where('contact_id', '=', contact.id).returning('contact_id').executeTakeFirst();
    if (removed) return contact.id;
    throw new NotFound((await this.find(segmentId)) ? 'Segment membership' : 'Segment');
  }

  /** One page of the segments the contact belongs to, the one joined last first. */
  async ofContact(contact: ContactKey, limit: number, cursor: Cursor): Promise<Page<JoinedSegment>> {
    const { query, order } = await this.joinedBy(contact);
    return keysetPage(query, order, limit, cursor);
  }

  /** Every segment the contact belongs to beyond the cursor, the one joined last first, in keyset chunks. */
  async *streamOfContact(contact: ContactKey, cursor: Cursor): AsyncGenerator<JoinedSegment> {
    const { query, order } = await this.joinedBy(contact);
    yield* keysetStream(query, order, cursor, (s) => [s.created_at, s.id]);
  }

  /** The segments the contact joined, in their order; NotFound if there is no such contact. */
  private async joinedBy([by, value]: ContactKey) {
    const contact = await this.db.selectFrom('contacts').select('id').where(by, '=', value).executeTakeFirst();
    if (!contact) throw new NotFound('Contact');
    const query = this.db
      .selectFrom('segment_contacts as sc')
      .innerJoin('segments as s', 's.id', 'sc.segment_id')
      .select(['s.id', 's.name', 'sc.created_at'])
      .where('sc.contact_id', '=', contact.id);
    // Over segment_contacts_by_contact (contact_id, created_at, segment_id); a cursor is one of its segments.
    const order: Order = {
      time: 'sc.created_at',
      id: 'sc.segment_id',
      position: async (segmentId) => {
        const at = await this.db.selectFrom('segment_contacts').select(['created_at', 'segment_id']).where('contact_id', '=', contact.id).where('segment_id', '=', segmentId).executeTakeFirst();
        return at && { time: at.created_at, id: at.segment_id };
      },
    };
    return { query, order };
  }

  private membersOf(segmentId: string) {
    return this.db
      .selectFrom('segment_contacts as sc')
      .innerJoin('contacts as c', 'c.id', 'sc.contact_id')
      .select(LISTED.map((column) => `c.${column}` as const))
      .where('sc.segment_id', '=', segmentId);
  }

  /**
   * Over segment_contacts_newest_first; a cursor is a member of this segment. Any contact would give a
   * place in the same order, but the contract has a cursor that names no item of the list refused.
   */
  private memberOrder(segmentId: string): Order {
    return {
      time: 'sc.contact_created_at',
      id: 'sc.contact_id',
      position: async (contactId) => {
        const at = await this.db
          .selectFrom('segment_contacts')
          .select(['contact_created_at', 'contact_id'])
          .where('segment_id', '=', segmentId)
          .where('contact_id', '=', contactId)
          .executeTakeFirst();
        return at && { time: at.contact_created_at, id: at.contact_id };
      },
    };
  }

  private readonly segmentOrder: Order = {
    time: 'created_at',
    id: 'id',
    position: async (id) => {
      const at = await this.find(id);
      return at && { time: at.created_at, id: at.id };
    },
  };

}

/** Within `tx`: the segment, kept from being deleted until `tx` ends (see locks.ts), or undefined. */
function lockSegment(tx: Transaction<Tables>, dialect: DialectName, id: string) {
  return shared(tx.selectFrom('segments').select('id').where('id', '=', id), dialect).executeTakeFirst();
}

/** Within `tx`: refuses the first id that names no segment, and keeps the others until `tx` ends. */
export async function requireSegments(tx: Transaction<Tables>, dialect: DialectName, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  const found = await shared(tx.selectFrom('segments').select('id').where('id', 'in', ids), dialect).execute();
  const known = new Set(found.map((row) => row.id));
  const unknown = ids.find((id) => !known.has(id));
  if (unknown) throw new UnknownReference('segments', unknown);
}

/** Within `tx`: adds the contact to each segment it is not in yet. */
export async function addMemberships(tx: Transaction<Tables>, contact: Pick<ContactRecord, 'id' | 'created_at'>, segmentIds: string[], now: string): Promise<void> {
  if (segmentIds.length === 0) return;
  const rows = [...new Set(segmentIds)].map((segment_id) => ({ segment_id, contact_id: contact.id, contact_created_at: contact.created_at, created_at: now }));
  await tx.insertInto('segment_contacts').values(rows).onConflict((oc) => oc.columns(['segment_id', 'contact_id']).doNothing()).execute();
}
