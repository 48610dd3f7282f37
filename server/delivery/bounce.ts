// What a bounce says, in the shape Resend's `email.bounced` event carries it: a type (a 5.x.x status
// is for good, a 4.x.x one may pass), a subtype read from the status code (RFC 3463), a sentence,
// and each recipient's diagnostic as the receiving server worded it.
import type { Refusal } from './transport.ts';

export interface Bounce {
  type: 'Permanent' | 'Transient' | 'Undetermined';
  subType: 'General' | 'NoEmail' | 'MailboxFull' | 'MessageTooLarge' | 'ContentRejected' | 'Undetermined';
  message: string;
  diagnosticCode: string[];
}

/** An enhanced status code (RFC 3463): class, subject, detail. */
const STATUS = /\b([245])\.(\d{1,3})\.(\d{1,3})\b/;

/** The enhanced status code in a reply or a DSN's Status field, if it has one. */
export function statusIn(text: string): string | undefined {
  return STATUS.exec(text)?.[0];
}

export function bounceType(status: string | undefined): Bounce['type'] {
  if (status?.startsWith('5.')) return 'Permanent';
  if (status?.startsWith('4.')) return 'Transient';
  return 'Undetermined';
}

export function bounceSubType(status: string | undefined): Bounce['subType'] {
  if (!status) return 'Undetermined';
  const [, subject, detail] = status.split('.');
  if (subject === '1' && ['1', '2', '3', '10'].includes(detail!)) return 'NoEmail'; // bad mailbox, system, syntax, null MX
  if (subject === '2' && detail === '2') return 'MailboxFull';
  if ((subject === '3' && detail === '4') || (subject === '2' && detail === '3')) return 'MessageTooLarge';
  if (subject === '7') return 'ContentRejected';
  return 'General';
}

/**
 * Whether a bounce puts its recipients on the suppression list: a Permanent one about the mailbox,
 * not one about this message (its content refused, too large) or a mailbox full for now, which a later
 * email may well get through. As Resend's (SES's) bounces have it, those are no reason to stop mailing.
 */
export function suppresses(bounce: Bounce): boolean {
  return bounce.type === 'Permanent' && !['ContentRejected', 'MessageTooLarge', 'MailboxFull'].includes(bounce.subType);
}

/**
 * A relay's synchronous 5xx refusal of some recipients, as a Permanent bounce: each reply is a
 * diagnostic, and the enhanced status code of the first (when it gives one) the subtype. The message
 * names the recipients refused, unless the refusal was of the message itself (at the end of DATA).
 */
export function refusal(refused: Refusal[]): Bounce {
  const first = refused[0]?.reply ?? '';
  const addresses = refused.map((r) => r.address);
  const whom = refused.length === 0 || refused.some((r) => r.withMessage) ? '' : ` for ${addresses.slice(0, 3).join(', ')}${addresses.length > 3 ? ` and ${addresses.length - 3} more` : ''}`;
  return {
    type: 'Permanent',
    subType: bounceSubType(statusIn(first) ?? '5.0.0'),
    message: `The receiving server refused the message${whom}: ${first}`.slice(0, 1000),
    diagnosticCode: refused.map((r) => `smtp; ${r.reply}`.slice(0, 1000)),
  };
}
