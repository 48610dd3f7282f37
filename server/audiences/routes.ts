// The legacy audiences: segments under their old name, answered with `object: "audience"`, and the
// contacts of one, which the Resend SDK still reaches through contacts.create/get/update/remove when
// given an `audienceId`. A contact acted on through an audience must be in it.
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { OperationHandler, PathParams, Schemas } from '../api.ts';
import { contactKey, newContact } from '../contacts/contact.ts';
import type { ContactHandlers } from '../contacts/routes.ts';
import { notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { MemberList } from '../segments/routes.ts';
import type { Store } from '../store/index.ts';
import { UnknownReference } from '../store/missing.ts';
import type { SegmentRecord } from '../store/segments.ts';
import type { Handlers } from '../http/operationRouter.ts';

/** `lists` writes the list of audiences asked for without `limit`. */
export function audienceHandlers(store: Store, contacts: ContactHandlers, listMembers: MemberList, lists: StreamedLists): Handlers {
  const segments = store.segments;
  const streamAudiences = lists.of('AudienceList', toAudience);

  const createAudience: OperationHandler<'createAudience'> = async (req, res) => {
    const record = { id: randomUUID(), name: req.body.name, created_at: new Date().toISOString() };
    await segments.insert(record);
    res.status(201).json({ object: 'audience', id: record.id, name: record.name });
  };

  const listAudiences: OperationHandler<'listAudiences'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('audience', () => streamAudiences(res, segments.stream(cursor)));
    const page = await listing('audience', () => segments.page(limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toAudience) });
  };

  const getAudience: OperationHandler<'getAudience'> = async (req, res) => {
    const record = await segments.find(req.params.audience_id);
    if (!record) throw notFound('Audience');
    res.json(toAudience(record));
  };

  const deleteAudience: OperationHandler<'deleteAudience'> = async (req, res) => {
    const { audience_id } = req.params;
    if (!(await segments.delete(audience_id))) throw notFound('Audience');
    res.json({ object: 'audience', id: audience_id, deleted: true });
  };

  const listAudienceContacts: OperationHandler<'listAudienceContacts'> = async (req, res) => {
    await listMembers(res, req.params.audience_id, req.query, 'Audience');
  };

  const createAudienceContact: OperationHandler<'createAudienceContact'> = async (req, res) => {
    const joins = { segments: [req.params.audience_id], topics: [], existingJoins: true };
    const { record, created } = await asAudience(store.contacts.insertUnlessExists(newContact(req.body), joins));
    res.status(created ? 201 : 200).json({ object: 'contact', id: record.id });
  };

  /** The contact operation, answered only if the contact is in the audience. */
  const inAudience =
    (operation: RequestHandler<any, any, any, any>): RequestHandler<PathParams<'getAudienceContact'>> =>
    async (req, res, next) => {
      const { audience_id } = req.params;
      if (!(await segments.find(audience_id))) throw notFound('Audience');
      if (!(await segments.isMember(audience_id, contactKey(req.params)))) throw notFound('Contact');
      return operation(req, res, next);
    };

  return {
    createAudience,
    listAudiences,
    getAudience,
    deleteAudience,
    listAudienceContacts,
    createAudienceContact,
    getAudienceContact: inAudience(contacts.getContact),
    updateAudienceContact: inAudience(contacts.updateContact),
    deleteAudienceContact: inAudience(contacts.deleteContact),
  };
}

function toAudience(record: SegmentRecord): Schemas['Audience'] {
  return { object: 'audience', id: record.id, name: record.name, created_at: record.created_at };
}

/** The audience is named by the path, not the body: an unknown one is a 404. */
async function asAudience<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof UnknownReference) throw notFound('Audience');
    throw error;
  }
}
