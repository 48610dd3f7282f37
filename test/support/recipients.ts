// Segments, contacts, memberships and topic choices written straight into the tables of migration
// 0006, for suites about broadcasts that must not depend on the routes that manage them.
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { ContactTopicTable, Tables, TopicTable } from '../../server/store/database.ts';

const now = () => new Date().toISOString();

export async function addSegment(db: Kysely<Tables>, name = 'Segment'): Promise<string> {
  const id = randomUUID();
  await db.insertInto('segments').values({ id, name, created_at: now() }).execute();
  return id;
}

export async function addTopic(db: Kysely<Tables>, default_subscription: TopicTable['default_subscription']): Promise<string> {
  const id = randomUUID();
  await db.insertInto('topics').values({ id, name: `Topic ${default_subscription}`, description: null, default_subscription, visibility: 'public', created_at: now() }).execute();
  return id;
}

export interface NewContact {
  email: string;
  unsubscribed?: boolean;
  /** The segments it is a member of. */
  segments?: string[];
  /** Its own choices, by topic id. */
  topics?: Record<string, ContactTopicTable['subscription']>;
}

/** Adds contacts in batches (SQLite takes at most 32,766 bound values a statement); returns their ids in order. */
export async function addContacts(db: Kysely<Tables>, contacts: NewContact[]): Promise<string[]> {
  const ids = contacts.map(() => randomUUID());
  const at = now();
  for (let start = 0; start < contacts.length; start += 2000) {
    const batch = contacts.slice(start, start + 2000);
    const batchIds = ids.slice(start, start + 2000);
    await db
      .insertInto('contacts')
      .values(batch.map((c, i) => ({ id: batchIds[i]!, email: c.email, email_key: c.email.toLowerCase(), first_name: null, last_name: null, unsubscribed: c.unsubscribed ? 1 : 0, properties: '{}', created_at: at, updated_at: at })))
      .execute();
    const memberships = batch.flatMap((c, i) => (c.segments ?? []).map((segment_id) => ({ segment_id, contact_id: batchIds[i]!, contact_created_at: at, created_at: at })));
    if (memberships.length) await db.insertInto('segment_contacts').values(memberships).execute();
    const choices = batch.flatMap((c, i) => Object.entries(c.topics ?? {}).map(([topic_id, subscription]) => ({ contact_id: batchIds[i]!, topic_id, subscription, updated_at: at })));
    if (choices.length) await db.insertInto('contact_topics').values(choices).execute();
  }
  return ids;
}

/** The outbox rows of one broadcast, as (contact id, count) pairs. */
export async function outboxOf(db: Kysely<Tables>, broadcastId: string): Promise<Map<string, number>> {
  const rows = await db.selectFrom('emails').select(['contact_id', db.fn.countAll<number>().as('n')]).where('broadcast_id', '=', broadcastId).groupBy('contact_id').execute();
  return new Map(rows.map((r) => [r.contact_id!, Number(r.n)]));
}
