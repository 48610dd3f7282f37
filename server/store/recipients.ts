// What a broadcast's emails need at delivery, read for a whole claimed batch at once (one query for
// the contacts, one for their topic choices, one for their segments), and an unsubscribe link's
// leaving all email.
import type { Kysely } from 'kysely';
import { contactEvent, segmentsOf } from './contacts.ts';
import type { ContactTable, Tables, TopicTable } from './database.ts';
import type { EventStore } from './events.ts';

export type RecipientContact = Pick<ContactTable, 'id' | 'email' | 'first_name' | 'last_name' | 'unsubscribed' | 'properties'>;
export type Subscription = TopicTable['default_subscription'];

export class RecipientStore {
  constructor(
    private readonly db: Kysely<Tables>,
    private readonly events: EventStore,
  ) {}

  /** The contacts among `ids` that still exist, by id. */
  async contacts(ids: string[]): Promise<Map<string, RecipientContact>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db
      .selectFrom('contacts')
      .select(['id', 'email', 'first_name', 'last_name', 'unsubscribed', 'properties'])
      .where('id', 'in', [...new Set(ids)])
      .execute();
    return new Map(rows.map((row) => [row.id, row]));
  }

  /**
   * Where each (contact, topic) pair stands, keyed `contact/topic`: the contact's own choice, else the
   * topic's default. A pair whose topic no longer exists is left out.
   */
  async subscriptions(pairs: { contactId: string; topicId: string }[]): Promise<Map<string, Subscription>> {
    if (pairs.length === 0) return new Map();
    const contactIds = [...new Set(pairs.map((p) => p.contactId))];
    const topicIds = [...new Set(pairs.map((p) => p.topicId))];
    const rows = await this.db
      .selectFrom('topics')
      .leftJoin('contact_topics', (join) => join.onRef('contact_topics.topic_id', '=', 'topics.id').on('contact_topics.contact_id', 'in', contactIds))
      .select(['topics.id as topic_id', 'topics.default_subscription', 'contact_topics.contact_id', 'contact_topics.subscription'])
      .where('topics.id', 'in', topicIds)
      .execute();
    const defaults = new Map(rows.map((row) => [row.topic_id, row.default_subscription]));
    const chosen = new Map(rows.filter((row) => row.contact_id !== null).map((row) => [`${row.contact_id}/${row.topic_id}`, row.subscription!]));
    const standing = new Map<string, Subscription>();
    for (const { contactId, topicId } of pairs) {
      const key = `${contactId}/${topicId}`;
      const value = chosen.get(key) ?? defaults.get(topicId);
      if (value) standing.set(key, value);
    }
    return standing;
  }

  /** Which (contact, segment) pairs are memberships still, keyed `contact/segment`. */
  async members(pairs: { contactId: string; segmentId: string }[]): Promise<Set<string>> {
    if (pairs.length === 0) return new Set();
    const rows = await this.db
      .selectFrom('segment_contacts')
      .select(['contact_id', 'segment_id'])
      .where('segment_id', 'in', [...new Set(pairs.map((p) => p.segmentId))])
      .where('contact_id', 'in', [...new Set(pairs.map((p) => p.contactId))])
      .execute();
    return new Set(rows.map((row) => `${row.contact_id}/${row.segment_id}`));
  }

  /**
   * Unsubscribes the contact from everything, a `contact.updated` event with it; false if it no longer
   * exists. One already unsubscribed is left as it is: mail clients may post the same link twice.
   */
  async unsubscribe(contactId: string, at: Date): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const updated_at = at.toISOString();
      const changed = await tx.updateTable('contacts').set({ unsubscribed: 1, updated_at }).where('id', '=', contactId).where('unsubscribed', '=', 0).returningAll().executeTakeFirst();
      if (changed) {
        await this.events.record(tx, [contactEvent('contact.updated', changed, await segmentsOf(tx, changed.id), updated_at)]);
        return true;
      }
      return (await tx.selectFrom('contacts').select('id').where('id', '=', contactId).executeTakeFirst()) !== undefined;
    });
  }
}
