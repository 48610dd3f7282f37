// What a report about an email that left does to it (applied by store/reports.ts in one transaction).
// A report that changes nothing records nothing: the same DSN delivered twice, a bounce for an email
// already `bounced`, a complaint already heard. A Permanent bounce suppresses its recipient, unless it
// is about the message rather than the mailbox (see bounce.ts `suppresses`); a Transient one does not;
// a complaint suppresses the recipient who made it. A report from the inbound listener is about the
// one recipient whose return path it reached (server/delivery/returnPath.ts), and changes nothing if
// it names anyone else: anyone who holds a copy of the email could send one.
import { parseMailbox } from '../emails/mailbox.ts';
import type { EmailEvent } from '../store/database.ts';
import type { EmailRecord } from '../store/emails.ts';
import { TOO_EARLY, type ReportChange } from '../store/reports.ts';
import { bounceSuppressions } from '../store/suppressions.ts';
import { suppresses, type Bounce } from './bounce.ts';

export type Decision = (email: EmailRecord) => ReportChange | typeof TOO_EARLY | undefined;

/**
 * The decision `decide` takes on the lines of a report about one recipient, when every line that names
 * an address names that recipient (a line that names none counts as about it); else none.
 */
export function onRecipient<Line extends { address: string | undefined }>(recipient: string, lines: Line[], decide: (lines: Line[], recipient: string) => Decision | undefined): Decision | undefined {
  const about = (line: Line) => line.address === undefined || line.address.toLowerCase() === recipient.toLowerCase();
  return lines.length > 0 && lines.every(about) ? decide(lines, recipient) : undefined;
}

/**
 * Where an email is once a relay took it. `delivered` is among them because a relay's acceptance was
 * recorded as `delivered` before `sent` existed, and such emails still bounce.
 */
const LEFT: EmailEvent[] = ['sent', 'delivered', 'delivery_delayed'];

export function bounced(bounce: Bounce, addresses: string[]): Decision {
  return (email) => {
    // `queued` too: a relay can report a failure before the worker has recorded handing the email over.
    if (![...LEFT, 'queued'].includes(email.last_event)) return undefined;
    const suppress = suppresses(bounce) ? bounceSuppressions(email.id, recipientsAmong(email, addresses)) : [];
    return { last_event: 'bounced', event: { type: 'email.bounced', data: { bounce } }, suppress, error: bounce.message };
  };
}

/**
 * A notice of delay, delivery or complaint can arrive while the email is still `queued`: the relay took
 * it and the worker has not yet recorded so. Taken then, it would change nothing and be lost; it is
 * refused for now instead (451), and its sender tries again.
 */
const early = (email: EmailRecord) => email.last_event === 'queued';

export function delayed(reason: string): Decision {
  return (email) => {
    if (early(email)) return TOO_EARLY;
    // Not after `delivered`: a late notice of delay cannot undo a notice of success.
    if (!['sent', 'delivery_delayed'].includes(email.last_event)) return undefined;
    return { last_event: 'delivery_delayed', event: { type: 'email.delivery_delayed', data: { reason } }, suppress: [], park: true };
  };
}

export function delivered(): Decision {
  return (email) => {
    if (early(email)) return TOO_EARLY;
    if (!['sent', 'delivery_delayed'].includes(email.last_event)) return undefined;
    return { last_event: 'delivered', event: { type: 'email.delivered' }, suppress: [] };
  };
}

/** `addresses`: who complained, when the report says; else the email's only recipient. */
export function complained(feedbackType: string | undefined, addresses: string[]): Decision {
  return (email) => {
    if (early(email)) return TOO_EARLY;
    if (!LEFT.includes(email.last_event)) return undefined;
    const recipients = recipientsAmong(email, addresses);
    if (addresses.length > 0 && recipients.length === 0) return undefined; // about someone else
    const all = recipientsOf(email);
    const who = recipients.length > 0 ? recipients : all.length === 1 ? all : [];
    const complaint = feedbackType ? { feedbackType } : {};
    return { last_event: 'complained', event: { type: 'email.complained', data: { complaint } }, suppress: who.map((address) => ({ email: address, origin: 'complaint' as const, source_id: email.id })) };
  };
}

/** The email's recipients (to, cc, bcc) that `addresses` names, without regard to case. */
function recipientsAmong(email: EmailRecord, addresses: string[]): string[] {
  const named = new Set(addresses.map((address) => address.toLowerCase()));
  return recipientsOf(email).filter((address) => named.has(address.toLowerCase()));
}

/** The email's recipients (to, cc, bcc), each once, as their bare addresses. */
export function recipientsOf(email: Pick<EmailRecord, 'to_addresses' | 'cc' | 'bcc'>): string[] {
  const addresses = [email.to_addresses, email.cc, email.bcc].flatMap((json) => (json === null ? [] : (JSON.parse(json) as string[])));
  return [...new Set(addresses.flatMap((value) => parseMailbox(value)?.address ?? []))];
}
