// A stored contact as the API shows it.
import type { Schemas } from '../api.ts';
import type { ListedContact } from '../store/contacts.ts';

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
