// Where an email stands, in words: the log's filter and column, and an email's own page.
import type { MailroomSchemas } from '../api.ts';

export type Status = MailroomSchemas['EmailEvent'];

// A Record, so that the compiler names any status the contract adds and this page lacks.
export const STATUS_LABELS: Record<Status, string> = {
  queued: 'Queued',
  scheduled: 'Scheduled',
  sent: 'Sent',
  delivered: 'Delivered',
  delivery_delayed: 'Delivery delayed',
  bounced: 'Bounced',
  complained: 'Complained',
  failed: 'Failed',
  suppressed: 'Suppressed',
  canceled: 'Canceled',
};

export const isStatus = (value: string | null): value is Status => value !== null && Object.hasOwn(STATUS_LABELS, value);

export function EmailStatus({ status }: { status: Status }) {
  return <span class={`status status-${status}`}>{STATUS_LABELS[status]}</span>;
}
