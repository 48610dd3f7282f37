// Topics, and each contact's own choice for a topic (contact_topics). Without a choice of its own, a
// contact's subscription is the topic's default_subscription.
import type { Kysely, Selectable, Transaction, Updateable } from 'kysely';
import { lockContact, type ContactKey } from './contacts.ts';
import type { ContactTopicTable, Database, DialectName, Tables, TopicTable } from './database.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';
import { refuseWhileAddressed } from './broadcasts.ts';
import { shared } from './locks.ts';
import { NotFound, UnknownReference } from './missing.ts';

export type TopicRecord = Selectable<TopicTable>;
export type TopicChanges = Pick<Updateable<TopicTable>, 'name' | 'description' | 'visibility'>;
export type TopicChoice = { id: string; subscription: ContactTopicTable['subscription'] };
/** A topic as one contact's list shows it, with that contact's subscription. */
export type SubscribedTopic = Pick<TopicRecord, 'id' | 'name' | 'description'> & { subscription: ContactTopicTable['subscription'] };
/** A topic of a contact's list as read, with its place in the list. */
export type ContactTopicRow = SubscribedTopic & { created_at: string };

export class TopicStore {
  private readonly db: Kysely<Tables>;

  constructor(private readonly database: Database) {
    this.db = database.db;
  }

  async insert(record: TopicRecord): Promise<void> {
    await this.db.insertInto('topics').values(record).execute();
  }

  find(id: string): Promise<TopicRecord | undefined> {
    return this.db.selectFrom('topics').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Read-modify-write, as ContactStore.update: `change` sees the stored topic (and may throw, which
   * changes nothing) and returns what to set. Returns the topic as stored after, or undefined.
   */
  async update(id: string, change: (current: TopicRecord) => TopicChanges): Promise<TopicRecord | undefined> {
    return this.db.transaction().execute(async (tx) => {
      const read = tx.selectFrom('topics').selectAll().where('id', '=', id);
      const current = await (this.database.dialect === 'postgres' ? read.forUpdate() : read).executeTakeFirst();
      if (!current) return undefined;
      const changes = change(current);
      if (Object.keys(changes).length === 0) return current;
      return tx.updateTable('topics').set(changes).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
    });
  }

  /** Deletes the topic and every contact's choice for it; false if there was no such topic. Refused while a broadcast still to go out is addressed to it. */
  async delete(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      // The topic first: see locks.ts.
      const deleted = await tx.deleteFrom('topics').where('id', '=', id).returning('id').executeTakeFirst();
      if (!deleted) return false;
      await refuseWhileAddressed(tx, 'topic', id);
      await tx.deleteFrom('contact_topics').where('topic_id', '=', id).execute();
      return true;
    });
  }

  /** One page of topics newest first. */
  page(limit: number, cursor: Cursor): Promise<Page<TopicRecord>> {
    return keysetPage(this.db.selectFrom('topics').selectAll(), this.order, limit, cursor);
  }

  /** Every topic beyond the cursor, newest first, in keyset chunks. */
  stream(cursor: Cursor): AsyncGenerator<TopicRecord> {
    return keysetStream(this.db.selectFrom('topics').selectAll(), this.order, cursor, (t) => [t.created_at, t.id]);
  }

  /** One page of topics (in the order of `page`), each with the contact's subscription to it: its own choice, or the default. */
  async ofContact(contact: ContactKey, limit: number, cursor: Cursor): Promise<Page<ContactTopicRow>> {
    return keysetPage(await this.subscriptionsOf(contact), this.contactOrder, limit, cursor);
  }

  /** Every topic beyond the cursor, as ofContact gives them, in keyset chunks. */
  async *streamOfContact(contact: ContactKey, cursor: Cursor): AsyncGenerator<ContactTopicRow> {
    yield* keysetStream(await this.subscriptionsOf(contact), this.contactOrder, cursor, (t) => [t.created_at, t.id]);
  }

  /** Topics with the contact's subscription to each; NotFound if there is no such contact. */
  private async subscriptionsOf([by, value]: ContactKey) {
    const contact = await this.db.selectFrom('contacts').select('id').where(by, '=', value).executeTakeFirst();
    if (!contact) throw new NotFound('Contact');
    return this.db
      .selectFrom('topics as t')
      .leftJoin('contact_topics as ct', (join) => join.onRef('ct.topic_id', '=', 't.id').on('ct.contact_id', '=', contact.id))
      .select((eb) => ['t.id', 't.name', 't.description', 't.created_at', eb.fn.coalesce('ct.subscription', 't.default_subscription').as('subscription')]);
  }

  /**
   * Records the contact's choices, all or none: every topic must exist (else UnknownReference). Of two
   * choices for one topic the last holds. Returns the contact's id and the choices, one per topic.
   */
  async choose(contact: ContactKey, choices: TopicChoice[]): Promise<{ contactId: string; choices: TopicChoice[] }> {
    const latest = [...new Map(choices.map((choice) => [choice.id, choice])).values()];
    return this.db.transaction().execute(async (tx) => {
      const found = await lockContact(tx, this.database.dialect, contact);
      if (!found) throw new NotFound('Contact');
      await requireTopics(tx, this.database.dialect, latest.map((choice) => choice.id));
      await saveChoices(tx, found.id, latest, new Date().toISOString());
      return { contactId: found.id, choices: latest };
    });
  }

  /**
   * The topics the unsubscribe page shows the contact, at most `limit` (`more` says there were others):
   * public ones and those it is subscribed to (a private topic is shown only to contacts who opted in),
   * and `also`, the topic of the link it followed, first, whatever its state: the reader knows of it,
   * and may want back in. Then oldest first, each with the contact's subscription.
   */
  async shownTo(contactId: string, also: string | undefined, limit: number): Promise<{ topics: SubscribedTopic[]; more: boolean }> {
    let query = shownQuery(this.db, contactId, also);
    if (also !== undefined) query = query.orderBy((eb) => eb.case().when('t.id', '=', also).then(0).else(1).end());
    const rows = await query.orderBy('t.created_at').orderBy('t.id').limit(limit + 1).execute();
    return { topics: rows.slice(0, limit), more: rows.length > limit };
  }

  /**
   * Records the unsubscribe page's choices for the topics among them that the page shows the contact
   * (as shownTo); the others, a topic deleted meanwhile among them, are left out. Of two choices for
   * one topic the last holds. Returns the topics whose choice was recorded, with it; NotFound if the
   * contact is gone.
   */
  async chooseShown(contactId: string, also: string | undefined, choices: TopicChoice[]): Promise<SubscribedTopic[]> {
    const latest = new Map(choices.map((choice) => [choice.id, choice.subscription]));
    return this.db.transaction().execute(async (tx) => {
      if (!(await lockContact(tx, this.database.dialect, ['id', contactId]))) throw new NotFound('Contact');
      if (latest.size === 0) return [];
      const ids = [...latest.keys()];
      // Kept from being deleted until the choices are written (locks.ts): no choice outlives its topic.
      await shared(tx.selectFrom('topics').select('id').where('id', 'in', ids), this.database.dialect).execute();
      const shown = await shownQuery(tx, contactId, also).where('t.id', 'in', ids).orderBy('t.created_at').orderBy('t.id').execute();
      const recorded = shown.map((topic) => ({ ...topic, subscription: latest.get(topic.id)! }));
      await saveChoices(tx, contactId, recorded.map(({ id, subscription }) => ({ id, subscription })), new Date().toISOString());
      return recorded;
    });
  }

  /** Over topics_newest_first; a cursor is a topic. */
  private readonly order: Order = {
    time: 'created_at',
    id: 'id',
    position: async (id) => {
      const at = await this.find(id);
      return at && { time: at.created_at, id: at.id };
    },
  };

  /** The same order where the topics are `t`, joined with a contact's choices. */
  private readonly contactOrder: Order = { ...this.order, time: 't.created_at', id: 't.id' };
}

/** The topics the unsubscribe page may show the contact (see TopicStore.shownTo), with its subscriptions. */
function shownQuery(db: Kysely<Tables>, contactId: string, also: string | undefined) {
  return db
    .selectFrom('topics as t')
    .leftJoin('contact_topics as ct', (join) => join.onRef('ct.topic_id', '=', 't.id').on('ct.contact_id', '=', contactId))
    .select((eb) => ['t.id', 't.name', 't.description', eb.fn.coalesce('ct.subscription', 't.default_subscription').as('subscription')])
    .where((eb) =>
      eb.or([
        eb('t.visibility', '=', 'public'),
        eb(eb.fn.coalesce('ct.subscription', 't.default_subscription'), '=', 'opt_in'),
        ...(also === undefined ? [] : [eb('t.id', '=', also)]),
      ]),
    );
}

/** Within `tx`: refuses the first id that names no topic, and keeps the others until `tx` ends. */
export async function requireTopics(tx: Transaction<Tables>, dialect: DialectName, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  const found = await shared(tx.selectFrom('topics').select('id').where('id', 'in', ids), dialect).execute();
  const known = new Set(found.map((row) => row.id));
  const unknown = ids.find((id) => !known.has(id));
  if (unknown) throw new UnknownReference('topics', unknown);
}

/** Within `tx`: sets the contact's choice for each topic, replacing any earlier one. */
export async function saveChoices(tx: Transaction<Tables>, contactId: string, choices: TopicChoice[], now: string): Promise<void> {
  // One row per topic: an upsert may not touch the same row twice in one statement.
  const rows = [...new Map(choices.map(({ id, subscription }) => [id, { contact_id: contactId, topic_id: id, subscription, updated_at: now }])).values()];
  if (rows.length === 0) return;
  await tx
    .insertInto('contact_topics')
    .values(rows)
    .onConflict((oc) => oc.columns(['contact_id', 'topic_id']).doUpdateSet((eb) => ({ subscription: eb.ref('excluded.subscription'), updated_at: eb.ref('excluded.updated_at') })))
    .execute();
}
