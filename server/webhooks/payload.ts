// The body of a delivery, made when it is posted from the event row (and the email row, for an email's
// event): `{type, created_at, data}`, as Resend's webhooks send it (openapi.yaml's `webhooks` section).
// An email event's `data` is the email's own fields and then what the event recorded (a bounce, a
// failure's reason); a contact or domain event's is the contact or domain as the event recorded it.
import type { Schemas } from '../api.ts';
import type { DeliveryContext } from '../store/webhookDeliveries.ts';

export interface WebhookPayload {
  type: Schemas['WebhookEventType'];
  created_at: string;
  data: Schemas['WebhookEventEmailData'] | Schemas['WebhookEventContactData'] | Schemas['WebhookEventDomainData'];
}

/** The payload, or why there can be none (the email it is about is not in the store). */
export function payloadOf({ event, email }: DeliveryContext): WebhookPayload | { missing: string } {
  const recorded = event.data === null ? {} : (JSON.parse(event.data) as Record<string, unknown>);
  if (event.type.startsWith('contact.')) {
    return { type: event.type, created_at: event.created_at, data: { id: event.contact_id, ...recorded } as Schemas['WebhookEventContactData'] };
  }
  // A domain event carries the domain as the change left it, records and all.
  if (event.type.startsWith('domain.')) return { type: event.type, created_at: event.created_at, data: recorded as Schemas['WebhookEventDomainData'] };
  if (!email) return { missing: `the email ${event.email_id} of this ${event.type} event is not in the store` };
  return { type: event.type, created_at: event.created_at, data: { ...emailData(email), ...recorded } };
}

function emailData(email: NonNullable<DeliveryContext['email']>): Schemas['WebhookEventEmailData'] {
  const tags = email.tags === null ? [] : (JSON.parse(email.tags) as Schemas['Tag'][]);
  const headers = email.headers === null ? {} : (JSON.parse(email.headers) as Record<string, string>);
  return {
    email_id: email.id,
    created_at: email.created_at,
    from: email.from_address,
    to: JSON.parse(email.to_addresses) as string[],
    subject: email.subject,
    ...(email.broadcast_id !== null && { broadcast_id: email.broadcast_id }),
    ...(email.message_id !== null && { message_id: email.message_id }),
    ...(tags.length > 0 && { tags: Object.fromEntries(tags.map((tag) => [tag.name, tag.value])) }),
    ...(Object.keys(headers).length > 0 && { headers: Object.entries(headers).map(([name, value]) => ({ name, value })) }),
  };
}
