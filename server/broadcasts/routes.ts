// Broadcasts: list, create (and send at once), retrieve, change and delete drafts, send, cancel, duplicate.
import { randomUUID } from 'node:crypto';
import type { OperationHandler, RequestBody } from '../api.ts';
import { invalidMailbox, mailboxColumn, mailboxList } from '../emails/mailbox.ts';
import { invalid, notFound } from '../http/errors.ts';
import { cursorOf, listing } from '../http/paging.ts';
import type { StreamedLists } from '../http/streamedList.ts';
import type { BroadcastChanges } from '../store/broadcasts.ts';
import type { Store } from '../store/index.ts';
import { refused, toBroadcast, toSummary } from './broadcast.ts';
import { sendTime } from '../schedule.ts';
import type { Handlers } from '../http/operationRouter.ts';
import type { Senders } from '../domains/senders.ts';

/**
 * `senders` holds a broadcast's `from` to the rules on sending domains when it is sent; `lists` writes
 * the list asked for without `limit`.
 */
export function broadcastHandlers(store: Store, senders: Senders, lists: StreamedLists): Handlers {
  const broadcasts = store.broadcasts;
  const streamBroadcasts = lists.of('BroadcastList', toSummary);

  const listBroadcasts: OperationHandler<'listBroadcasts'> = async (req, res) => {
    const { limit } = req.query;
    const cursor = cursorOf(req.query);
    if (limit === undefined) return listing('broadcast', () => streamBroadcasts(res, broadcasts.stream(cursor)));
    const page = await listing('broadcast', () => broadcasts.page(limit, cursor));
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map(toSummary) });
  };

  const createBroadcast: OperationHandler<'createBroadcast'> = async (req, res) => {
    const { segment_id, audience_id, name, from, subject, reply_to, preview_text, html, text, topic_id, send, scheduled_at } = req.body;
    checkFields(req.body);
    const record = {
      id: randomUUID(),
      name: name ?? 'Untitled',
      segment_id: (segment_id ?? audience_id)!,
      from_address: from,
      subject,
      reply_to: mailboxColumn(mailboxList(reply_to)),
      preview_text: preview_text ?? null,
      html: html ?? null,
      text: text ?? null,
      status: 'draft' as const,
      topic_id: topic_id ?? null,
      created_at: new Date().toISOString(),
      scheduled_at: null,
      sent_at: null,
    };
    if (send) {
      await senders.check([from], res.locals.apiKey);
      const refusal = await broadcasts.insertAndSend(record, await sendTime(scheduled_at, new Date()));
      if (refusal) throw refused(refusal, 'send');
    } else await broadcasts.insert(record);
    res.status(201).json({ id: record.id });
  };

  const getBroadcast: OperationHandler<'getBroadcast'> = async (req, res) => {
    const record = await broadcasts.find(req.params.broadcast_id);
    if (!record) throw notFound('Broadcast');
    res.json(toBroadcast(record));
  };

  const updateBroadcast: OperationHandler<'updateBroadcast'> = async (req, res) => {
    const { segment_id, audience_id, name, from, subject, reply_to, preview_text, html, text, topic_id } = req.body;
    checkFields(req.body);
    const segment = segment_id ?? audience_id;
    const changes: BroadcastChanges = {
      ...(segment !== undefined && { segment_id: segment }),
      ...(name !== undefined && { name }),
      ...(from !== undefined && { from_address: from }),
      ...(subject !== undefined && { subject }),
      ...(reply_to !== undefined && { reply_to: mailboxColumn(mailboxList(reply_to)) }),
      ...(preview_text !== undefined && { preview_text }),
      ...(html !== undefined && { html }),
      ...(text !== undefined && { text }),
      ...(topic_id !== undefined && { topic_id }),
    };
    const id = req.params.broadcast_id;
    const refusal = await broadcasts.update(id, changes);
    if (refusal) throw refused(refusal, 'change');
    res.json({ object: 'broadcast', id });
  };

  const deleteBroadcast: OperationHandler<'deleteBroadcast'> = async (req, res) => {
    const id = req.params.broadcast_id;
    const refusal = await broadcasts.delete(id);
    if (refusal) throw refused(refusal, 'delete');
    res.json({ object: 'broadcast', id, deleted: true });
  };

  const sendBroadcast: OperationHandler<'sendBroadcast'> = async (req, res) => {
    const id = req.params.broadcast_id;
    const broadcast = await broadcasts.find(id);
    if (broadcast) await senders.check([broadcast.from_address], res.locals.apiKey);
    const refusal = await broadcasts.send(id, await sendTime(req.body?.scheduled_at, new Date()));
    if (refusal) throw refused(refusal, 'send');
    res.json({ object: 'broadcast', id });
  };

  const cancelBroadcast: OperationHandler<'cancelBroadcast'> = async (req, res) => {
    const id = req.params.broadcast_id;
    const refusal = await broadcasts.cancel(id, new Date());
    if (refusal) throw refused(refusal, 'cancel');
    res.json({ object: 'broadcast', id });
  };

  const duplicateBroadcast: OperationHandler<'duplicateBroadcast'> = async (req, res) => {
    const record = await broadcasts.find(req.params.broadcast_id);
    if (!record) throw notFound('Broadcast');
    const { name, segment_id, from_address, subject, reply_to, preview_text, html, text, topic_id } = record;
    const copy = { id: randomUUID(), name, segment_id, from_address, subject, reply_to, preview_text, html, text, topic_id, status: 'draft' as const, created_at: new Date().toISOString(), scheduled_at: null, sent_at: null };
    await broadcasts.insert(copy);
    res.json({ object: 'broadcast', id: copy.id });
  };

  return { listBroadcasts, createBroadcast, getBroadcast, updateBroadcast, deleteBroadcast, sendBroadcast, cancelBroadcast, duplicateBroadcast };
}

/** What the schema cannot say: the two names of the segment agree, and each address is one mailbox. */
function checkFields({ segment_id, audience_id, from, reply_to }: RequestBody<'updateBroadcast'>): void {
  if (segment_id && audience_id && segment_id !== audience_id) {
    throw invalid('`segment_id` and its legacy name `audience_id` name different segments; give one of them.');
  }
  const badAddress = (from !== undefined ? invalidMailbox('from', [from]) : undefined) ?? invalidMailbox('reply_to', mailboxList(reply_to));
  if (badAddress) throw invalid(badAddress);
}
