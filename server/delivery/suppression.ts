// Suppressed recipients are taken out of a message before it goes: out of the envelope and out of the
// To and Cc headers. An email left with nobody to send to is not sent; it ends `suppressed`. The list
// is read once per claimed batch (one query for every recipient in it), not once per email.
import { parseMailbox, type Mailbox } from '../emails/mailbox.ts';
import type { ClaimedEmail } from '../store/emails.ts';
import type { Store } from '../store/index.ts';
import type { SuppressionOrigin } from '../store/suppressions.ts';
import type { OutgoingMessage } from './message.ts';

/** The batch's suppressed recipients: lower-cased address → why it is suppressed. */
export type Suppressed = Map<string, SuppressionOrigin>;

/** What `email.suppressed` carries (Resend's shape). */
export interface SuppressedData {
  suppressed: { type: 'OnAccountSuppressionList'; reason: 'previous_bounce' | 'previous_complaint' | 'manual'; message: string; diagnosticCode: string[] };
}

const REASONS = { bounce: 'previous_bounce', complaint: 'previous_complaint', manual: 'manual' } as const;

/** Every recipient of the batch that is on the suppression list, in one query. */
export async function suppressedIn(store: Store, emails: ClaimedEmail[]): Promise<Suppressed> {
  const keys = new Set(emails.flatMap((email) => [email.to_addresses, email.cc, email.bcc].flatMap(addressesIn)).map((address) => address.toLowerCase()));
  return store.suppressions.among([...keys]);
}

/**
 * The message without its suppressed recipients, or, when none would be left, what the email's
 * `email.suppressed` event says.
 */
export function withoutSuppressed(message: OutgoingMessage, suppressed: Suppressed): { send: OutgoingMessage } | { withdraw: SuppressedData } {
  const { envelope } = message;
  const isSuppressed = (address: string) => suppressed.has(address.toLowerCase());
  if (suppressed.size === 0 || !envelope.to.some(isSuppressed)) return { send: message };
  const to = envelope.to.filter((address) => !isSuppressed(address));
  if (to.length === 0) {
    const origin = suppressed.get(envelope.to[0]!.toLowerCase())!;
    const message = `The recipient${envelope.to.length > 1 ? 's are' : ' is'} on the suppression list (${origin}): ${envelope.to.join(', ')}.`;
    return { withdraw: { suppressed: { type: 'OnAccountSuppressionList', reason: REASONS[origin], message, diagnosticCode: [] } } };
  }
  const kept = (list: Mailbox[] | undefined) => list?.filter((mailbox) => !isSuppressed(mailbox.address));
  const [toHeader, ccHeader] = [kept(message.to), kept(message.cc)];
  return {
    send: {
      ...message,
      envelope: { ...envelope, to },
      to: toHeader?.length ? toHeader : undefined,
      cc: ccHeader?.length ? ccHeader : undefined,
    },
  };
}

function addressesIn(json: string | null): string[] {
  if (json === null) return [];
  try {
    const values = JSON.parse(json) as unknown;
    return Array.isArray(values) ? values.flatMap((value) => (typeof value === 'string' ? (parseMailbox(value)?.address ?? []) : [])) : [];
  } catch {
    return []; // toMessage fails such an email with the reason
  }
}
