// Reading the mail that comes back: a delivery status notification (RFC 3464, multipart/report with
// report-type=delivery-status) or a complaint (ARF, RFC 5965, report-type=feedback-report), parsed
// with mailparser. What it says, and whom it names; which email and recipient it is about is the
// listener's to say, from the return path it reached (server/inbound/listener.ts).
import type { Attachment, ParsedMail } from 'mailparser';
import { keptText } from '../store/outsideText.ts';

export interface DsnRecipient {
  /** Whom the line is about: its Original-Recipient (the ORCPT the message went out with), else its Final-Recipient. */
  address: string | undefined;
  /** failed, delayed, delivered, relayed or expanded (lower-cased). */
  action: string;
  status: string | undefined;
  diagnostic: string | undefined;
}

export type Report =
  | { kind: 'dsn'; recipients: DsnRecipient[] }
  /** `rcptTo`: whom the complaint names (Original-Rcpt-To), as given when it is not one address. */
  | { kind: 'complaint'; feedbackType: string | undefined; rcptTo: string | undefined }
  | { kind: 'other'; why: string };

export async function readReport(raw: Buffer): Promise<Report> {
  // keepDeliveryStatus and ignoreEmbedded keep the report's parts as parts, instead of folding them into the text.
  const { simpleParser } = await import('mailparser'); // see server/inbound/listener.ts
  const mail: ParsedMail = await simpleParser(raw, { keepDeliveryStatus: true, ignoreEmbedded: true } as object);
  const type = mail.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  const reportType = type?.value === 'multipart/report' ? type.params?.['report-type']?.toLowerCase() : undefined;
  const part = (contentType: string) => mail.attachments.find((a) => a.contentType === contentType);

  if (reportType === 'delivery-status') {
    const status = part('message/delivery-status');
    if (!status) return { kind: 'other', why: 'a delivery-status report without its message/delivery-status part' };
    const [, ...perRecipient] = fieldGroups(text(status));
    return {
      kind: 'dsn',
      recipients: perRecipient
        .filter((fields) => fields.has('action'))
        .map((fields) => ({
          address: addressIn(fields.get('original-recipient')) ?? addressIn(fields.get('final-recipient')),
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
    const rcptTo = fields.get('original-rcpt-to');
    return {
      kind: 'complaint',
      feedbackType: fields.get('feedback-type')?.trim().toLowerCase().slice(0, 100),
      rcptTo: rcptTo === undefined ? undefined : (addressIn(rcptTo) ?? rcptTo.slice(0, 320)),
    };
  }
  return { kind: 'other', why: reportType ? `a report of type ${reportType.slice(0, 100)}` : 'not a multipart/report' };
}

// A NUL read here would reach the event's data, and from there webhook receivers, whose stores may
// refuse it as PostgreSQL does (outsideText.ts).
const text = (attachment: Attachment) => keptText(attachment.content.toString('utf8'));

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
