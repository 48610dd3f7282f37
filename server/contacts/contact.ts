// A stored contact as the API shows it. Every read path checks it against the contract's Contact schema
// with the same rules that accepted it (server/contract.ts), so a contact stored through the API is
// always returnable. Rows stored by versions with looser rules (an address like `a@localhost`, or with
// more than 64 characters before its `@`; more than 50 properties after a PATCH) would still fail that
// check and break the unpaginated list; repairing such rows is a data migration, not something a read
// can do, and is left out.
import type { PathParams, Schemas } from '../api.ts';
import type { ContactKey, ContactRecord, ListedContact } from '../store/contacts.ts';
import { timeOrderedId } from '../store/timeOrderedId.ts';
import type { ListStream } from '../http/streamedList.ts';

/** The writer of a whole contact list (server/http/streamedList.ts). */
export type ContactStream = ListStream<ListedContact>;

export function toContact(record: ListedContact): Schemas['Contact'] {
  return {
    object: 'contact',
    id: record.id,
    email: record.email,
    ...(record.first_name !== null && { first_name: record.first_name }),
    ...(record.last_name !== null && { last_name: record.last_name }),
    created_at: record.created_at,
    unsubscribed: Boolean(record.unsubscribed),
    properties: JSON.parse(record.properties),
  };
}

/** A contact to store, from the fields of a create request. */
export function newContact({ email, first_name, last_name, unsubscribed, properties }: Schemas['CreateAudienceContactRequest']): ContactRecord {
  const now = new Date().toISOString();
  return {
    id: timeOrderedId(),
    email,
    email_key: email.toLowerCase(),
    first_name: first_name ?? null,
    last_name: last_name ?? null,
    unsubscribed: unsubscribed ? 1 : 0,
    properties: JSON.stringify(properties ?? {}),
    created_at: now,
    updated_at: now,
  };
}

/** The path names a contact by id or by email; emails are matched without regard to case. */
export function contactKey({ contact_id }: PathParams<'getContact'>): ContactKey {
  return contact_id.includes('@') ? ['email_key', contact_id.toLowerCase()] : ['id', contact_id];
}
