// Contacts: list (paged or streamed whole), create (joining segments and topics), retrieve, update, delete.
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { OperationHandler, Schemas } from '../api.ts';
import { invalid, notFound } from '../http/errors.ts';
import type { Cursor } from '../store/contacts.ts';
import { UnknownCursor } from '../store/contacts.ts';
import type { Store } from '../store/index.ts';
import { contactKey, newContact, toContact } from './contact.ts';
import type { ContactStream } from './contact.ts';
import type { MemberList } from '../segments/routes.ts';

export type ContactHandlers = ReturnType<typeof contactHandlers>;

/**
 * The operations' handlers, which the legacy audience routes reuse. `validProperties` is the contract's
 * ContactProperties schema, which every stored contact must satisfy.
 */
export function contactHandlers(store: Store, streamContacts: ContactStream, validProperties: ValidateFunction, listMembers: MemberList) {
  const contacts = store.contacts;

  const listContacts: OperationHandler<'listContacts'> = async (req, res) => {
    const { limit, after, before, segment_id } = req.query;
    // Resend's filter: the segment's contacts, as its own list gives them.
    if (segment_id !== undefined) return listMembers(res, segment_id, req.query, 'Segment');
    if (after && before) throw invalid('Only one of `after` or `before` may be given.');
    const cursor: Cursor = after ? { after } : before ? { before } : {};
    try {
      if (limit === undefined) return await streamContacts(res, contacts.stream(cursor));
      const page = await contacts.page(limit, cursor);
      res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toContact) });
    } catch (error) {
      if (error instanceof UnknownCursor) throw invalid(`The \`${error.parameter}\` contact does not exist.`);
      throw error;
    }
  };

  const createContact: OperationHandler<'createContact'> = async (req, res) => {
    const { segments = [], topics = [] } = req.body;
    const joins = segments.length || topics.length ? { segments: segments.map((segment) => (typeof segment === 'string' ? segment : segment.id)), topics } : undefined;
    const { record, created } = await contacts.insertUnlessExists(newContact(req.body), joins);
    res.status(created ? 201 : 200).json({ object: 'contact', id: record.id });
  };

  const getContact: OperationHandler<'getContact'> = async (req, res) => {
    const record = await contacts.find(...contactKey(req.params));
    if (!record) throw notFound('Contact');
    res.json(toContact(record));
  };

  const updateContact: OperationHandler<'updateContact'> = async (req, res) => {
    const { email, first_name, last_name, unsubscribed, properties } = req.body;
    // Runs inside the store's transaction: refusing here rolls the update back.
    const record = await contacts.update(...contactKey(req.params), (current) => ({
      ...(email !== undefined && { email }),
      ...(first_name !== undefined && { first_name }),
      ...(last_name !== undefined && { last_name }),
      ...(unsubscribed !== undefined && { unsubscribed: unsubscribed ? 1 : 0 }),
      ...(properties !== undefined && { properties: JSON.stringify(mergeProperties(JSON.parse(current.properties), properties)) }),
      updated_at: new Date().toISOString(),
    }));
    if (!record) throw notFound('Contact');
    res.json({ object: 'contact', id: record.id });
  };

  const deleteContact: OperationHandler<'deleteContact'> = async (req, res) => {
    const id = await contacts.delete(...contactKey(req.params));
    if (!id) throw notFound('Contact');
    res.json({ object: 'contact', contact: id, deleted: true });
  };

  /**
   * Keys not named keep their values, and a key set to null is removed. Each value was checked with the
   * request, but only the result can be checked against the contract's limits (how many keys): a
   * contact that broke them could no longer be read, alone or in any list.
   */
  function mergeProperties(current: Schemas['ContactProperties'], change: Schemas['ContactPropertiesUpdate']): Schemas['ContactProperties'] {
    // Spread and fromEntries define keys rather than assign them, so `__proto__` stays an ordinary key.
    const merged = Object.fromEntries(Object.entries({ ...current, ...change }).filter((entry): entry is [string, string] => entry[1] !== null));
    if (!validProperties(merged)) {
      const [error] = validProperties.errors!;
      if (error?.keyword === 'maxProperties') {
        const count = Object.keys(merged).length;
        throw invalid(`The \`properties\` would hold ${count} keys after this update; at most ${error.params.limit} are allowed. Remove some by setting them to \`null\`.`);
      }
      throw invalid(`The \`properties\` would not be valid after this update: ${[error?.instancePath, error?.message].filter(Boolean).join(' ')}.`);
    }
    return merged;
  }

  return { listContacts, createContact, getContact, updateContact, deleteContact };
}
