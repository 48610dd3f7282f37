// A stored broadcast as the API shows it, whole or in a list, and the answer to a move it refused.
import type { Schemas } from '../api.ts';
import { ApiError, invalid, notFound } from '../http/errors.ts';
import type { BroadcastRecord, ListedBroadcast, Refusal } from '../store/broadcasts.ts';

export function toBroadcast(record: BroadcastRecord): Schemas['Broadcast'] {
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

export function toSummary(record: ListedBroadcast): Schemas['BroadcastSummary'] {
  return {
    id: record.id,
    name: record.name,
    audience_id: record.segment_id,
    segment_id: record.segment_id,
    status: record.status,
    created_at: record.created_at,
    scheduled_at: record.scheduled_at,
    sent_at: record.sent_at,
    topic_id: record.topic_id,
  };
}

/** What each move starts from, as its refusal says it. */
const ALLOWED = {
  change: 'only a `draft` can be changed',
  delete: 'only a `draft` or a `scheduled` broadcast can be deleted',
  send: 'only a `draft` can be sent',
  cancel: 'only a `scheduled` or `queued` broadcast can be canceled',
} as const;

/** The error for a refused move: 404 for an unknown broadcast, else a 422 naming what stands in the way. */
export function refused(refusal: Refusal, move: keyof typeof ALLOWED): ApiError {
  switch (refusal.refused) {
    case 'not_found':
      return notFound('Broadcast');
    case 'status':
      return invalid(`The broadcast is \`${refusal.status}\`; ${ALLOWED[move]}.`);
    case 'segment':
      return invalid(`The segment \`${refusal.segmentId}\` does not exist; create it or give another \`segment_id\`.`);
    case 'topic':
      return invalid(`The topic \`${refusal.topicId}\` does not exist; create it or give another \`topic_id\`.`);
    case 'body':
      return invalid('The broadcast has no body: `html` and `text` are both missing or empty; give one of them before sending it.');
  }
}
