// Reading the mail that comes back: a delivery status notification (RFC 3464, multipart/report with
// report-type=delivery-status) or a complaint (ARF, RFC 5965, report-type=feedback-report), parsed
// with mailparser. Which email it is about: the VERP address it was sent to, else (a DSN) the
// Original-Envelope-Id we asked the relay to return, else (an ARF) the return path the original
// carried, else the Message-ID of the original's headers as returned (`<email id@domain>`).
import type { Attachment, ParsedMail } from 'mailparser';
import { keptText } from '../store/outsideText.ts';

export interface DsnRecipient {
  address: string | undefined;
  /** failed, delayed, delivered, relayed or expanded (lower-cased). */
  action: string;
  status: string | undefined;
  diagnostic: string | undefined;
}

export type Report =
  | { kind: 'dsn'; emailId: string | undefined; recipients: DsnRecipient[] }
  | { kind: 'complaint'; emailId: string | undefined; feedbackType: string | undefined; addresses: string[] }
  | { kind: 'other'; why: string };

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const VERP = new RegExp(`^<?bounces\\+(${UUID})@`, 'i');
const MESSAGE_ID = new RegExp(`^\\s*<(${UUID})@`, 'i');
const ENVELOPE_ID = new RegExp(`^\\s*(${UUID})\\s*$`, 'i');
/** The parts that hold the original message, or its headers. */
const ORIGINAL = ['text/rfc822-headers', 'message/rfc822', 'message/rfc822-headers'];

/** What the message reports; `recipients` are the addresses of its SMTP envelope (RCPT TO). */
export async function readReport(raw: Buffer, recipients: string[]): Promise<Report> {
  // keepDeliveryStatus and ignoreEmbedded keep the report's parts as parts, instead of folding them into the text.
  const { simpleParser } = await import('mailparser'); // see server/inbound/listener.ts
  const mail: ParsedMail = await simpleParser(raw, { keepDeliveryStatus: true, ignoreEmbedded: true } as object);
  const type = mail.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  const reportType = type?.value === 'multipart/report' ? type.params?.['report-type']?.toLowerCase() : undefined;
  const verp = recipients.map((address) => VERP.exec(address)?.[1]).find(Boolean);
  const part = (contentType: string) => mail.attachments.find((a) => a.contentType === contentType);
  const original = mail.attachments.find((a) => ORIGINAL.includes(a.contentType));
  const originalId = original ? MESSAGE_ID.exec(headerFields(text(original)).get('message-id') ?? '')?.[1] : undefined;

  if (reportType === 'delivery-status') {
    const status = part('message/delivery-status');
    if (!status) return { kind: 'other', why: 'a delivery-status report without its message/delivery-status part' };
    const [perMessage = new Map<string, string>(), ...perRecipient] = fieldGroups(text(status));
    const envelopeId = ENVELOPE_ID.exec(perMessage.get('original-envelope-id') ?? '')?.[1];
    return {
      kind: 'dsn',
      emailId: lower(verp ?? envelopeId ?? originalId),
      recipients: perRecipient
        .filter((fields) => fields.has('action'))
        .map((fields) => ({
          address: addressIn(fields.get('final-recipient') ?? fields.get('original-recipient')),
          action: fields.get('action')!.trim().toLowerCase(),
          status: fields.get('status')?.trim(),
          diagnostic: fields.get('diagnostic-code')?.trim(),
        })),
    };
  }
  if (reportType === 'feedback-report') {
    const feedback = part('message/feedback-report');
    if (!feedback) return { kind: 'other', why: 'a feedback report without its message/feedback-report part' };
    const fields = headerFields(text(feedback));
    const returnPath = VERP.exec(fields.get('original-mail-from')?.trim() ?? '')?.[1];
    const rcptTo = fields.get('original-rcpt-to');
    return {
      kind: 'complaint',
      emailId: lower(verp ?? returnPath ?? originalId),
      feedbackType: fields.get('feedback-type')?.trim().toLowerCase().slice(0, 100),
      addresses: rcptTo ? [addressIn(rcptTo)].filter((a): a is string => a !== undefined) : [],
    };
  }
  return { kind: 'other', why: reportType ? `a report of type ${reportType.slice(0, 100)}` : 'not a multipart/report' };
}

// A NUL read here would reach the event's data, and from there webhook receivers, whose stores may
// refuse it as PostgreSQL does (outsideText.ts).
const text = (attachment: Attachment) => keptText(attachment.content.toString('utf8'));
const lower = (id: string | undefined) => id?.toLowerCase();

/** `rfc822; someone@example.com`, `<someone@example.com>` or a bare address, as the bare address. */
function addressIn(value: string | undefined): string | undefined {
  const address = value?.replace(/^\s*rfc822\s*;/i, '').trim().replace(/^<(.*)>$/, '$1').trim();
  return address && /^[^\s@<>]+@[^\s@<>]+$/.test(address) ? address : undefined;
}

/** Groups of `Name: value` fields separated by blank lines (RFC 3464's per-message and per-recipient fields). */
function fieldGroups(body: string): Map<string, string>[] {
  return body
    .replace(/\r\n/g, '\n')
    .split(/\n[ \t]*\n/)
    .map(headerFields)
    .filter((fields) => fields.size > 0);
}

/** The header fields of a block, names lower-cased, folded lines unfolded; the first of a repeated field wins. */
function headerFields(block: string): Map<string, string> {
  const head = block.replace(/\r\n/g, '\n').split(/\n\n/, 1)[0] ?? '';
  const fields = new Map<string, string>();
  for (const line of head.replace(/\n[ \t]+/g, ' ').split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (!fields.has(name)) fields.set(name, line.slice(colon + 1).trim());
  }
  return fields;
}
