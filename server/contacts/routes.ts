// Contacts: list (paged or streamed whole), create, retrieve, update, delete.
import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import type { OperationHandler, PathParams } from '../api.ts';
import { invalid, notFound } from '../errors.ts';
import type { Cursor } from '../store/contacts.ts';
import { UnknownCursor } from '../store/contacts.ts';
import type { Store } from '../store/index.ts';
import { toContact } from './contact.ts';
import type { ContactStream } from './stream.ts';

export function contactRoutes(store: Store, streamContacts: ContactStream): Router {
  const contacts = store.contacts;

  const listContacts: OperationHandler<'listContacts'> = async (req, res) => {
    const { limit, after, before } = req.query;
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
    const { email, first_name, last_name, unsubscribed, properties } = req.body;
    const now = new Date().toISOString();
    const { record, created } = await contacts.insertUnlessExists({
      id: randomUUID(),
      email,
      email_key: email.toLowerCase(),
      first_name: first_name ?? null,
      last_name: last_name ?? null,
      unsubscribed: unsubscribed ? 1 : 0,
      properties: JSON.stringify(properties ?? {}),
      created_at: now,
      updated_at: now,
    });
    res.status(created ? 201 : 200).json({ object: 'contact', id: record.id });
  };

  const getContact: OperationHandler<'getContact'> = async (req, res) => {
    const record = await contacts.find(...lookup(req.params));
    if (!record) throw notFound('Contact');
    res.json(toContact(record));
  };

  const updateContact: OperationHandler<'updateContact'> = async (req, res) => {
    const { first_name, last_name, unsubscribed, properties } = req.body;
    const record = await contacts.update(...lookup(req.params), (current) => ({
      ...(first_name !== undefined && { first_name }),
      ...(last_name !== undefined && { last_name }),
      ...(unsubscribed !== undefined && { unsubscribed: unsubscribed ? 1 : 0 }),
      // Properties merge: keys not named keep their values.
      ...(properties !== undefined && { properties: JSON.stringify({ ...JSON.parse(current.properties), ...properties }) }),
      updated_at: new Date().toISOString(),
    }));
    if (!record) throw notFound('Contact');
    res.json({ object: 'contact', id: record.id });
  };

  const deleteContact: OperationHandler<'deleteContact'> = async (req, res) => {
    const id = await contacts.delete(...lookup(req.params));
    if (!id) throw notFound('Contact');
    res.json({ object: 'contact', contact: id, deleted: true });
  };

  return Router()
    .get('/', listContacts)
    .post('/', createContact)
    .get('/:contact_id', getContact)
    .patch('/:contact_id', updateContact)
    .delete('/:contact_id', deleteContact);
}

/** The path names a contact by id or by email; emails are matched without regard to case. */
function lookup({ contact_id }: PathParams<'getContact'>): ['id' | 'email_key', string] {
  return contact_id.includes('@') ? ['email_key', contact_id.toLowerCase()] : ['id', contact_id];
}
