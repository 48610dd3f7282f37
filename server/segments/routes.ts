// Segments (create, list, retrieve, rename, delete, list their contacts) and a contact's memberships
// (add, remove, list), under /segments and /contacts/{contact_id}/segments.
import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import type { OperationHandler, Schemas } from '../api.ts';
import { contactKey, toContact, type ContactStream } from '../contacts/contact.ts';
import { notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { Store } from '../store/index.ts';
import type { JoinedSegment, SegmentRecord } from '../store/segments.ts';
import type { Handlers } from '../http/operationRouter.ts';

/** `lists` writes the lists asked for without `limit`; `streamContacts` a segment's contacts. */
export function segmentHandlers(store: Store, streamContacts: ContactStream, lists: StreamedLists): Handlers {
  const segments = store.segments;
  const listMembers = memberList(store, streamContacts);
  const streamSegments = lists.of('SegmentList', toSegment);
  const streamContactSegments = lists.of('ContactSegmentList', toContactSegment);

  const createSegment: OperationHandler<'createSegment'> = async (req, res) => {
    const record = { id: randomUUID(), name: req.body.name, created_at: new Date().toISOString() };
    await segments.insert(record);
    res.status(201).json({ object: 'segment', id: record.id, name: record.name });
  };

  const listSegments: OperationHandler<'listSegments'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('segment', () => streamSegments(res, segments.stream(cursor)));
    const page = await listing('segment', () => segments.page(limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toSegment) });
  };

  const getSegment: OperationHandler<'getSegment'> = async (req, res) => {
    const record = await segments.find(req.params.segment_id);
    if (!record) throw notFound('Segment');
    res.json(toSegment(record));
  };

  const updateSegment: OperationHandler<'updateSegment'> = async (req, res) => {
    const { segment_id } = req.params;
    if (!(await segments.rename(segment_id, req.body.name))) throw notFound('Segment');
    res.json({ object: 'segment', id: segment_id });
  };

  const deleteSegment: OperationHandler<'deleteSegment'> = async (req, res) => {
    const { segment_id } = req.params;
    if (!(await segments.delete(segment_id))) throw notFound('Segment');
    res.json({ object: 'segment', id: segment_id, deleted: true });
  };

  const listSegmentContacts: OperationHandler<'listSegmentContacts'> = async (req, res) => {
    await listMembers(res, req.params.segment_id, req.query, 'Segment');
  };

  const addContactToSegment: OperationHandler<'addContactToSegment'> = async (req, res) => {
    const { segment_id } = req.params;
    const contactId = await segments.add(segment_id, contactKey(req.params));
    res.json({ object: 'contact_segment', id: segment_id, contact_id: contactId, segment_id });
  };

  const removeContactFromSegment: OperationHandler<'removeContactFromSegment'> = async (req, res) => {
    const { segment_id } = req.params;
    const contactId = await segments.remove(segment_id, contactKey(req.params));
    res.json({ object: 'contact_segment', id: segment_id, contact_id: contactId, segment_id, deleted: true });
  };

  const listContactSegments: OperationHandler<'listContactSegments'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('segment of this contact', () => streamContactSegments(res, segments.streamOfContact(contactKey(req.params), cursor)));
    const page = await listing('segment of this contact', () => segments.ofContact(contactKey(req.params), limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toContactSegment) });
  };

  return { createSegment, listSegments, getSegment, updateSegment, deleteSegment, listSegmentContacts, listContactSegments, addContactToSegment, removeContactFromSegment };
}

export type MemberList = ReturnType<typeof memberList>;

/**
 * Answers with a segment's contacts exactly as the whole contact list answers: a page with `limit`,
 * else all of them, streamed. `what` names the segment in a 404 (`Audience` on the legacy routes).
 */
export function memberList(store: Store, streamContacts: ContactStream) {
  return async (res: Response, segmentId: string, query: { limit?: number; after?: string; before?: string }, what: 'Segment' | 'Audience'): Promise<void> => {
    const cursor = cursorOf(query);
    if (!(await store.segments.find(segmentId))) throw notFound(what);
    // A cursor must be a member: any other contact, though it has a place in the order, is not an item of this list.
    await listing(`contact of this ${what.toLowerCase()}`, async () => {
      if (query.limit === undefined) return streamContacts(res, store.segments.streamMembers(segmentId, cursor));
      const page = await store.segments.members(segmentId, query.limit, cursor);
      const body: Schemas['ContactList'] = { object: 'list', has_more: page.hasMore, data: page.records.map(toContact) };
      res.json(body);
    });
  };
}

export function toSegment(record: SegmentRecord): Schemas['Segment'] {
  return { object: 'segment', id: record.id, name: record.name, created_at: record.created_at };
}

function toContactSegment(record: JoinedSegment): Schemas['ContactSegment'] {
  return { id: record.id, name: record.name, created_at: record.created_at };
}
