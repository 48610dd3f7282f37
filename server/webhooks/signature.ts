// Standard Webhooks signatures, as Resend's (Svix's) deliveries carry them: the receiver recomputes
// the HMAC over the delivery's id, the attempt's timestamp and the exact body, and refuses a stale
// timestamp, so that a captured delivery cannot be replayed later or altered.
import { createHmac, randomBytes } from 'node:crypto';

/** `whsec_` and 32 random bytes in base64: the form the Resend SDK's `webhooks.verify` takes. */
export const newSigningSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/**
 * The headers of one attempt: under Svix's names, which Resend sends, and under Standard Webhooks'
 * names, which that specification's libraries read.
 */
export function signedHeaders(secret: string, id: string, at: Date, body: string): Record<string, string> {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signature = `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
  return {
    'svix-id': id,
    'svix-timestamp': timestamp,
    'svix-signature': signature,
    'webhook-id': id,
    'webhook-timestamp': timestamp,
    'webhook-signature': signature,
  };
}
