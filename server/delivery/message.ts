// The message for a stored email. Recipients come from `to`, `cc` and `bcc` only: the envelope
// (MAIL FROM, RCPT TO) is given explicitly, so nothing in the headers can add a recipient, and the
// address headers are written from the parsed mailboxes (server/delivery/mime.ts), never re-read
// from strings. `bcc` is in the envelope alone, never in a header. Custom header names were held to
// the contract's list when the email was accepted (CustomHeaders in openapi.yaml).
//
// With a bounce domain, each recipient's copy goes out with a return path of its own, naming the
// email and that recipient and signed (server/delivery/returnPath.ts), so that a bounce finds its
// email and recipient whatever the remote server kept of it, and nobody else can report on that copy.
// The relay is asked for delivery status notifications of failure and delay (RFC 3461), sent only to
// relays that advertise DSN.
import { createRequire } from 'node:module';
import type { HtmlToTextOptions } from 'html-to-text';
import type { SendMailOptions } from 'nodemailer';
import { parseMailbox, type Mailbox } from '../emails/mailbox.ts';
import type { EmailAttachment, EmailRecord } from '../store/emails.ts';
import type { MessageAttachment, MessageFields } from './mime.ts';
import type { ReturnPaths } from './returnPath.ts';

/** A message to send: what it is built from (server/delivery/mime.ts), and who it goes to. */
export interface OutgoingMessage extends MessageFields {
  /** `from` is the return path of every recipient, unless `returnPaths` gives each its own. */
  envelope: { from: string; to: string[] };
  /**
   * Each recipient's own return path. With it, the transport sends each recipient its copy in a
   * transaction of its own, from that return path (server/delivery/transport.ts).
   */
  returnPaths?: (recipient: string) => string;
  /** Delivery status notifications asked of the relay (RFC 3461); ORCPT names each recipient in its own transaction. */
  dsn?: SendMailOptions['dsn'];
  /** The key it is signed with (DKIM), when its `from` is on a verified domain. */
  dkim?: DkimKey;
}

/** A domain's DKIM signing key, in the shape nodemailer's DKIM signer takes. */
export interface DkimKey {
  domainName: string;
  keySelector: string;
  /** PKCS#8 PEM. */
  privateKey: string;
  /** The header fields signed, colon-separated, where present. */
  headerFieldNames?: string;
}

/**
 * How a message from one sender leaves: where its bounces come back to (the return path's domain),
 * and the key it is signed with. Both come from the `from` address's domain when it is verified.
 */
export interface SendingIdentity {
  bounceDomain?: string;
  dkim?: DkimKey;
}

// One converter, compiled once; links come out as `text [url]`. Plain text is made here, not on
// the request path: html-to-text costs milliseconds per message. A broadcast's is made once, from its
// html template (server/broadcasts/personalize.ts). html-to-text is loaded at the first conversion:
// a server that has sent nothing, and its delivery thread, would each hold it in memory for nothing.
//
// Email html is laid out in tables: each row is a line and its cells are set apart by a space (by
// default they ran together, `ItemQtyPrice`), and a cell holding blocks keeps them. Headings keep
// their case: upper-casing one upper-cases the names and values placed in it too.
const PLAIN_TEXT: HtmlToTextOptions = {
  wordwrap: 78,
  formatters: {
    cell: (elem, walk, builder) => {
      walk(elem.children, builder);
      builder.addInline(' ');
    },
  },
  selectors: [
    { selector: 'tr', format: 'block', options: { leadingLineBreaks: 1, trailingLineBreaks: 1 } },
    { selector: 'td', format: 'cell' },
    { selector: 'th', format: 'cell' },
    ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, options: { uppercase: false } })),
  ],
};
let convert: ((html: string) => string) | undefined;
/** The last body converted: a batch often sends one body to many recipients, one after another. */
let last: { html: string; text: string } | undefined;

export function plainText(html: string): string {
  if (last?.html !== html) {
    convert ??= (createRequire(import.meta.url)('html-to-text') as typeof import('html-to-text')).compile(PLAIN_TEXT);
    last = { html, text: convert(html) };
  }
  return last.text;
}

/** A stored email that no message can be built from, such as one accepted before a rule it breaks. */
export class UnsendableEmail extends Error {}

/**
 * Its Message-ID derives from the email's id, so a message delivered twice (the worker died between
 * sending and recording it) is recognisably the same. A bounce domain needs `returnPaths`, which
 * signs each recipient's return path.
 */
export function toMessage(email: EmailRecord, { bounceDomain, dkim, returnPaths }: SendingIdentity & { returnPaths?: ReturnPaths } = {}): OutgoingMessage {
  if (bounceDomain && !returnPaths) throw new Error('a bounce domain was given without the key that signs return paths');
  const mailbox = (field: string, value: string): Mailbox => {
    const parsed = parseMailbox(value);
    if (!parsed) throw new UnsendableEmail(`The stored \`${field}\` address \`${value}\` is not one mailbox; the email cannot be sent.`);
    return parsed;
  };
  const mailboxes = (field: string, json: string | null) => (json === null ? [] : (JSON.parse(json) as string[]).map((value) => mailbox(field, value)));
  const from = mailbox('from', email.from_address);
  const to = mailboxes('to', email.to_addresses);
  const cc = mailboxes('cc', email.cc);
  const bcc = mailboxes('bcc', email.bcc);
  const replyTo = mailboxes('reply_to', email.reply_to);
  const text = email.text === null ? (email.html ? plainText(email.html) : undefined) : email.text === '' ? undefined : email.text;
  const domain = from.address.slice(from.address.lastIndexOf('@') + 1);
  const recipients = [...new Set([...to, ...cc, ...bcc].map((m) => m.address))];
  return {
    messageId: `<${email.id}@${domain}>`,
    from,
    ...(to.length > 0 && { to }),
    ...(cc.length > 0 && { cc }),
    ...(replyTo.length > 0 && { replyTo }),
    envelope: { from: from.address, to: recipients },
    ...(bounceDomain && returnPaths && { returnPaths: (recipient: string) => returnPaths.make(email.id, recipient, bounceDomain) }),
    ...(bounceDomain && { dsn: { id: email.id, return: 'headers', notify: ['failure', 'delay'] } }),
    subject: email.subject,
    // An empty html part would be what mail clients show, over the text: none is sent.
    ...(email.html ? { html: email.html } : {}),
    ...(text !== undefined && { text }),
    headers: email.headers === null ? undefined : JSON.parse(email.headers),
    date: new Date(readyAt(email)),
    ...(dkim && { dkim }),
  };
}

/**
 * When the message was ready to go out, its Date (RFC 5322 3.6.1): when it was accepted, or a scheduled
 * one's time. The same on every attempt, so a message sent twice is the same message.
 */
const readyAt = ({ created_at, scheduled_at }: Pick<EmailRecord, 'created_at' | 'scheduled_at'>) => (scheduled_at !== null && scheduled_at > created_at ? scheduled_at : created_at);

/** An email's stored attachments, for its message. */
export const toAttachments = (stored: EmailAttachment[]): MessageAttachment[] =>
  stored.map((a) => ({ filename: a.filename, contentType: a.content_type, contentId: a.content_id, base64: a.content }));
