// The MIME message of an email, built directly into one buffer (RFC 5322, RFC 2045–2047). An email
// here is addresses, a subject, custom headers and a text and/or an HTML body, so the body is one text
// part or a multipart/alternative of two; inline attachments put it in a multipart/related beside
// them, other attachments in a multipart/mixed after it. nodemailer's
// composer builds the same through a stream pipeline per part and a scan of each body per encoding
// it considers, many times slower (docs/design.md; the bench's delivery section shows the effect).
//
// Safety: no value given can start a header or a part of its own. Line breaks in header values
// (a personalized subject may hold them) become spaces; a custom header named like one written here
// (From, Bcc, Content-Type…) is dropped, as is one whose name is not a header name; bodies are
// encoded so that no line is longer than 998 characters (76 when encoded) and the boundary is random.
import { randomUUID } from 'node:crypto';
import type { Mailbox } from '../emails/mailbox.ts';

/** What a message is built from. Bcc is not here: it is in the envelope alone. */
export interface MessageFields {
  messageId: string;
  from: Mailbox;
  to?: Mailbox[];
  cc?: Mailbox[];
  replyTo?: Mailbox[];
  subject: string;
  html?: string;
  text?: string;
  /** Custom headers, by name. */
  headers?: Record<string, string>;
  date: Date;
  attachments?: MessageAttachment[];
}

/** A file sent with the message; with a content id it is inline, for the html's `cid:` references. */
export interface MessageAttachment {
  filename: string | null;
  contentType: string;
  contentId: string | null;
  /** The file's bytes in base64, without line breaks. */
  base64: string;
}

/** Headers this builder writes itself, lower-cased: a custom header of one of these names is dropped. */
const OWN_HEADERS = new Set([
  'from', 'to', 'cc', 'bcc', 'reply-to', 'sender', 'return-path', 'subject', 'message-id', 'date', 'mime-version', 'content-type', 'content-transfer-encoding',
]);
/** RFC 5322 field names: printable US-ASCII but the colon. */
const FIELD_NAME = /^[!-9;-~]{1,76}$/;
const LINE = 76;
/** The longest line 7bit may carry (RFC 5322 2.1.1), without its CRLF. */
const LINE_7BIT = 998;
/** A header line's longest: RFC 2047's for a line holding an encoded word, within RFC 5322's 78. */
const HEADER_LINE = 76;

export function buildMessage(fields: MessageFields, boundary = `mr-${randomUUID()}`): Buffer {
  const head: string[] = [
    header('From', mailboxes([fields.from])),
    ...(fields.to?.length ? [header('To', mailboxes(fields.to))] : []),
    ...(fields.cc?.length ? [header('Cc', mailboxes(fields.cc))] : []),
    ...(fields.replyTo?.length ? [header('Reply-To', mailboxes(fields.replyTo))] : []),
    header('Subject', unstructured(fields.subject)),
    `Message-ID: ${oneLine(fields.messageId)}`,
    `Date: ${fields.date.toUTCString().replace(/GMT$/, '+0000')}`,
    'MIME-Version: 1.0',
  ];
  for (const [name, value] of Object.entries(fields.headers ?? {})) {
    if (FIELD_NAME.test(name) && !OWN_HEADERS.has(name.toLowerCase())) head.push(header(name, /^x-/i.test(name) ? unstructured(String(value)) : structured(String(value))));
  }
  const parts = [
    ...(fields.text !== undefined ? [part('text/plain', fields.text)] : []),
    ...(fields.html !== undefined ? [part('text/html', fields.html)] : []),
  ];
  if (parts.length === 0) parts.push(part('text/plain', ''));
  let body = parts.length === 1 ? parts[0]! : multipart('alternative', boundary, parts);
  // Each level's boundary differs from the others' from its first character: none is a prefix of another.
  const inline = fields.attachments?.filter((a) => a.contentId !== null) ?? [];
  if (inline.length > 0) body = multipart('related', `r${boundary}`, [body, ...inline.map(attachmentPart)]);
  const attached = fields.attachments?.filter((a) => a.contentId === null) ?? [];
  if (attached.length > 0) body = multipart('mixed', `m${boundary}`, [body, ...attached.map(attachmentPart)]);
  // A line break after a single part's body would be part of it; the relay's end of data (CRLF . CRLF) follows it.
  return Buffer.from(`${head.join('\r\n')}\r\n${body}${body === parts[0] ? '' : '\r\n'}`);
}

/** A multipart entity of `parts`, its own Content-Type first; no line ending after its closing boundary. */
function multipart(subtype: string, boundary: string, parts: string[]): string {
  const body = parts.map((p) => `--${boundary}\r\n${p}\r\n`).join('');
  return `Content-Type: multipart/${subtype};\r\n boundary="${boundary}"\r\n\r\n${body}--${boundary}--`;
}

/** An attachment's part: its type and name, inline with its Content-ID or an attachment, and its bytes in base64 lines. */
function attachmentPart(attachment: MessageAttachment): string {
  const name = attachment.filename === null ? [] : parameter('name', attachment.filename);
  const filename = attachment.filename === null ? [] : parameter('filename', attachment.filename);
  const lines = [
    [`Content-Type: ${attachment.contentType}`, ...name].join(';\r\n '),
    'Content-Transfer-Encoding: base64',
    [attachment.contentId === null ? 'Content-Disposition: attachment' : 'Content-Disposition: inline', ...filename].join(';\r\n '),
    ...(attachment.contentId === null ? [] : [`Content-ID: <${attachment.contentId}>`]),
  ];
  return `${lines.join('\r\n')}\r\n\r\n${base64Lines(attachment.base64)}`;
}

/** RFC 2231's attribute characters: any other byte of a value is written %XX. */
const ATTRIBUTE_CHAR = /[A-Za-z0-9!#$&+.^_`|~-]/;

/**
 * A header parameter: `name="value"` for a short value of printable ASCII, else RFC 2231's UTF-8 form
 * in numbered sections of at most 60 characters, none splitting a %XX, each for its own folded line.
 */
function parameter(name: string, value: string): string[] {
  if (/^[\x20-\x7e]{0,60}$/.test(value) && !/["\\]/.test(value)) return [`${name}="${value}"`];
  const sections: string[] = [];
  let section = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const char = String.fromCharCode(byte);
    const written = byte < 0x80 && ATTRIBUTE_CHAR.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    if (section.length + written.length > 60) {
      sections.push(section);
      section = '';
    }
    section += written;
  }
  sections.push(section);
  return sections.map((text, n) => `${name}*${n}*=${n === 0 ? "utf-8''" : ''}${text}`);
}

/** A body part's headers, a blank line, and its content encoded; no line ending after the last line. */
function part(type: string, content: string): string {
  const bytes = Buffer.from(content.replace(/\r\n?/g, '\n'), 'utf8');
  const encoding = transferEncoding(bytes);
  const encoded =
    encoding === '7bit' ? bytes.toString('latin1').replaceAll('\n', '\r\n') : encoding === 'base64' ? base64Lines(bytes.toString('base64')) : quotedPrintable(bytes);
  return `Content-Type: ${type}; charset=utf-8\r\nContent-Transfer-Encoding: ${encoding}\r\n\r\n${encoded}`;
}

/** 7bit for lines of printable ASCII that fit; base64 when most bytes would need escaping; else quoted-printable. */
function transferEncoding(bytes: Buffer): '7bit' | 'quoted-printable' | 'base64' {
  let high = 0;
  let plain = true;
  let lineLength = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === 0x0a) {
      // A line may not end in a space or tab in 7bit: transports strip them.
      if (lineLength > 0 && (bytes[i - 1] === 0x20 || bytes[i - 1] === 0x09)) plain = false;
      lineLength = 0;
      continue;
    }
    if (++lineLength > LINE_7BIT || (byte < 0x20 && byte !== 0x09) || byte === 0x7f) plain = false;
    if (byte > 0x7f) {
      plain = false;
      high++;
    }
  }
  if (plain && lineLength > 0 && (bytes.at(-1) === 0x20 || bytes.at(-1) === 0x09)) plain = false;
  if (plain) return '7bit';
  return high * 2 > bytes.length ? 'base64' : 'quoted-printable';
}

/** The ASCII codes of each byte's two hex digits, and whether a byte is always escaped. */
const HEX = Buffer.from('0123456789ABCDEF');
const ESCAPED = new Uint8Array(256).map((_, byte) => (byte === 0x3d || byte > 0x7e || (byte < 0x20 && byte !== 0x09) ? 1 : 0));

/**
 * Quoted-printable (RFC 2045 6.7): line breaks stay hard breaks (CRLF), every byte that is not
 * printable ASCII, and `=`, is escaped, as is a space or tab that ends a line, and lines are cut
 * with soft breaks to at most 76 characters, the `=` included, never inside an escape.
 */
function quotedPrintable(bytes: Buffer): string {
  // At most three characters a byte, plus a soft break (3) every 73.
  const out = Buffer.allocUnsafe(bytes.length * 3 + Math.ceil((bytes.length * 3) / 73) * 3 + 3);
  let at = 0;
  let column = 0;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === 0x0a) {
      out[at++] = 0x0d;
      out[at++] = 0x0a;
      column = 0;
      continue;
    }
    const escape = ESCAPED[byte] === 1 || ((byte === 0x20 || byte === 0x09) && (i + 1 === bytes.length || bytes[i + 1] === 0x0a));
    const width = escape ? 3 : 1;
    // Room for this character and the `=` of a soft break after it.
    if (column + width > LINE - 1) {
      out[at++] = 0x3d;
      out[at++] = 0x0d;
      out[at++] = 0x0a;
      column = 0;
    }
    if (escape) {
      out[at++] = 0x3d;
      out[at++] = HEX[byte >> 4]!;
      out[at++] = HEX[byte & 0x0f]!;
    } else {
      out[at++] = byte;
    }
    column += width;
  }
  return out.toString('latin1', 0, at);
}

/** Base64 text cut into lines of 76 characters. */
function base64Lines(encoded: string): string {
  const lines: string[] = [];
  for (let i = 0; i < encoded.length; i += LINE) lines.push(encoded.slice(i, i + LINE));
  return lines.join('\r\n');
}

/** A header of words that may be folded between them (joined by single spaces when unfolded). */
function header(name: string, words: string[]): string {
  let out = `${name}:`;
  let lineLength = out.length;
  for (const [index, word] of words.entries()) {
    // Fold before a word that would pass the line; right after the name only when the word then fits
    // (a long encoded word after a long name); never before a word of only whitespace (two spaces in
    // a row, tabs), which would leave a line of only whitespace: RFC 5322 forbids one, and some
    // readers take it for the end of the headers.
    if (/[^ \t]/.test(word) && lineLength + 1 + word.length > HEADER_LINE && (index > 0 || 1 + word.length <= HEADER_LINE)) {
      out += `\r\n ${word}`;
      lineLength = 1 + word.length;
    } else {
      out += ` ${word}`;
      lineLength += 1 + word.length;
    }
  }
  return out;
}

const oneLine = (value: string) => value.replace(/[\r\n]+/g, ' ');
/** Printable US-ASCII and tab, with nothing a reader would decode (`=?`). */
const PLAIN_TEXT = /^(?:[\t\x20-\x3c\x3e-\x7e]|=(?!\?))*$/;

/** An unstructured value (RFC 5322 2.2.1): its own words when plain, else encoded words. */
function unstructured(value: string): string[] {
  const line = oneLine(value);
  // A plain value is kept as written, unless it has a word too long to fit any line.
  if (PLAIN_TEXT.test(line) && !line.split(' ').some((word) => word.length > 900)) return line.split(' ');
  return encodedWords(line);
}

/**
 * A structured value (List-Unsubscribe's URLs, References' message ids): no reader decodes encoded
 * words in one, so it goes as written, folded only where it has spaces; the contract holds it to
 * printable ASCII short enough for one line with its name. Anything else, from a row stored before
 * that rule, is encoded rather than sent broken.
 */
function structured(value: string): string[] {
  const line = oneLine(value);
  return /^[\t\x20-\x7e]{0,950}$/.test(line) ? line.split(' ') : unstructured(line);
}

/**
 * RFC 2047 encoded words (base64, UTF-8), each at most 75 characters and never splitting a
 * character: a reader joins adjacent ones without the space between them.
 */
function encodedWords(value: string): string[] {
  const words: string[] = [];
  let chunk = '';
  let chunkBytes = 0;
  for (const char of value) {
    const bytes = Buffer.byteLength(char);
    if (chunkBytes + bytes > 45) {
      words.push(`=?UTF-8?B?${Buffer.from(chunk).toString('base64')}?=`);
      chunk = '';
      chunkBytes = 0;
    }
    chunk += char;
    chunkBytes += bytes;
  }
  if (chunk !== '' || words.length === 0) words.push(`=?UTF-8?B?${Buffer.from(chunk).toString('base64')}?=`);
  return words;
}

/** RFC 5322 atext and spaces: a display name of only these needs no quotes. */
const ATOM_PHRASE = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~ -]+$/;

/** A list of mailboxes as words: each display name as written, quoted or encoded, then its address. */
function mailboxes(list: Mailbox[]): string[] {
  return list.flatMap((mailbox, index) => {
    const comma = index < list.length - 1 ? ',' : '';
    const name = oneLine(mailbox.name).trim();
    return name === '' ? [mailbox.address + comma] : [...displayName(name), `<${mailbox.address}>${comma}`];
  });
}

function displayName(name: string): string[] {
  if (ATOM_PHRASE.test(name) && !name.includes('=?') && !name.includes('  ')) return name.split(' ');
  if (/^[\t\x20-\x7e]*$/.test(name) && !name.includes('=?')) return [`"${name.replace(/[\\"]/g, '\\$&')}"`];
  return encodedWords(name);
}
