// Standard Webhooks signatures, as Resend's (Svix's) deliveries carry them: the receiver recomputes
// the HMAC over the delivery's id, the attempt's timestamp and the exact body, and refuses a stale
// timestamp, so that a captured delivery cannot be replayed later or altered.
import { createHmac, randomBytes } from 'node:crypto';

/** `whsec_` and 32 random bytes in base64: the form the Resend SDK's `webhooks.verify` takes. */
export const newSigningSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/** How long a rotated-out secret still signs, beside the new one: a day, as Resend's does. */
export const PREVIOUS_SECRET_SIGNS_MS = 24 * 3600_000;

/**
 * The headers of one attempt: under Svix's names, which Resend sends, and under Standard Webhooks'
 * names, which that specification's libraries read. Signed with each of `secrets` (the current one,
 * and the one before it while it still signs), space-separated: a receiver holding either verifies.
 */
export function signedHeaders(secrets: string[], id: string, at: Date, body: string): Record<string, string> {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const signature = secrets
    .map((secret) => `v1,${createHmac('sha256', Buffer.from(secret.replace(/^whsec_/, ''), 'base64')).update(`${id}.${timestamp}.${body}`).digest('base64')}`)
    .join(' ');
  return {
    'svix-id': id,
    'svix-timestamp': timestamp,
    'svix-signature': signature,
    'webhook-id': id,
    'webhook-timestamp': timestamp,
    'webhook-signature': signature,
  };
}
