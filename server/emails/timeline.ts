// An email's timeline: its acceptance (`email.queued`, which is the email's own created_at and not a
// stored event), then its stored events, oldest first.
import { createHash } from 'node:crypto';
import type { Schemas } from '../api.ts';
import type { EventTable } from '../store/database.ts';
import type { EmailRecord } from '../store/emails.ts';

/** The namespace of the queued events' name-based ids: any fixed UUID would do, this one is ours. */
const QUEUED_NAMESPACE = Buffer.from('fceb861db0894dd882d0f85b61cf9bee', 'hex');

/**
 * The id of an email's `email.queued` event: a version 5 UUID of the email's id, so that it is the
 * same on every read and never the id of anything else.
 */
export function queuedEventId(emailId: string): string {
  const bytes = createHash('sha1').update(QUEUED_NAMESPACE).update(emailId).digest().subarray(0, 16);
  bytes[6] = 0x50 | (bytes[6]! & 0x0f);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function toTimeline(email: Pick<EmailRecord, 'id' | 'created_at'>, events: EventTable[]): Schemas['EmailTimeline'] {
  const queued: Schemas['EmailTimelineEvent'] = { object: 'event', id: queuedEventId(email.id), type: 'email.queued', created_at: email.created_at, data: {} };
  const recorded = events.map(
    (event): Schemas['EmailTimelineEvent'] => ({
      object: 'event',
      id: event.id,
      type: event.type as Schemas['EmailTimelineEventType'],
      created_at: event.created_at,
      data: event.data === null ? {} : JSON.parse(event.data),
    }),
  );
  return { object: 'list', has_more: false, data: [queued, ...recorded] };
}
