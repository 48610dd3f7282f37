// Broadcasts: create a draft, retrieve one.
import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import type { OperationHandler, Schemas } from '../api.ts';
import { invalidMailbox, mailboxList } from '../emails/mailbox.ts';
import { invalid, notFound } from '../errors.ts';
import type { BroadcastRecord } from '../store/broadcasts.ts';
import type { Store } from '../store/index.ts';

export function broadcastRoutes(store: Store): Router {
  const createBroadcast: OperationHandler<'createBroadcast'> = async (req, res) => {
    const { segment_id, audience_id, name, from, subject, reply_to, preview_text, html, text, topic_id } = req.body;
    // audience_id is the legacy name of segment_id: either may be given, both only if they agree.
    if (segment_id && audience_id && segment_id !== audience_id) {
      throw invalid('`segment_id` and its legacy name `audience_id` name different segments; give one of them.');
    }
    const badAddress = invalidMailbox('from', [from]) ?? invalidMailbox('reply_to', mailboxList(reply_to));
    if (badAddress) throw invalid(badAddress);
    const record = {
      id: randomUUID(),
      name: name ?? 'Untitled',
      segment_id: (segment_id ?? audience_id)!,
      from_address: from,
      subject,
      reply_to: reply_to === undefined ? null : JSON.stringify(mailboxList(reply_to)),
      preview_text: preview_text ?? null,
      html: html ?? null,
      text: text ?? null,
      status: 'draft' as const,
      topic_id: topic_id ?? null,
      created_at: new Date().toISOString(),
      scheduled_at: null,
      sent_at: null,
    };
    await store.broadcasts.insert(record);
    res.status(201).json({ id: record.id });
  };

  const getBroadcast: OperationHandler<'getBroadcast'> = async (req, res) => {
    const record = await store.broadcasts.find(req.params.broadcast_id);
    if (!record) throw notFound('Broadcast');
    res.json(toBroadcast(record));
  };

  return Router().post('/', createBroadcast).get('/:broadcast_id', getBroadcast);
}

function toBroadcast(record: BroadcastRecord): Schemas['Broadcast'] {
  return {
    object: 'broadcast',
    id: record.id,
    name: record.name,
    audience_id: record.segment_id,
    segment_id: record.segment_id,
    from: record.from_address,
    subject: record.subject,
    reply_to: record.reply_to === null ? null : JSON.parse(record.reply_to),
    preview_text: record.preview_text,
    html: record.html,
    text: record.text,
    status: record.status,
    created_at: record.created_at,
    scheduled_at: record.scheduled_at,
    sent_at: record.sent_at,
    topic_id: record.topic_id,
  };
}
