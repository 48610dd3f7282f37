// The unpaginated contact list (and a segment's, which answers the same way): the streamed-list writer
// of server/http/streamedList.ts, each contact checked against the Contact schema compiled from openapi.yaml.
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { listStream, type ListStream, type StreamOptions } from '../http/streamedList.ts';
import type { ListedContact } from '../store/contacts.ts';
import { toContact } from './contact.ts';

export type ContactStream = ListStream<ListedContact>;
export type { StreamOptions };

export function contactStream(validateContact: ValidateFunction, options: StreamOptions): ContactStream {
  return listStream('ContactList', validateContact, toContact, options);
}
