// One mailbox per string, wherever an address enters: `address@domain` or `Display Name <address@domain>`.
// A string that a mail parser could read as several mailboxes, a group or a comment would fan out into
// several recipients once it reaches a header or the envelope, so it is refused, not interpreted. The
// string must have the plain shape below, and nodemailer's own parser (the one that reads it again when
// the message is built) must find in it exactly that one mailbox: both readings have to agree.
import addressparser from 'nodemailer/lib/addressparser';
import { quoted } from '../quoted.ts';

export interface Mailbox {
  /** The display name, unquoted; empty when there is none. */
  name: string;
  address: string;
}

// RFC 5322 dot-atom local part; a domain of LDH labels with at least one dot.
const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const ADDRESS = `${ATEXT}+(?:\\.${ATEXT}+)*@${LABEL}(?:\\.${LABEL})+`;
// A display name is a quoted string (where `\` escapes the next character), or plain text without the
// characters that would make a parser read it as something else: specials, quotes, control characters.
const QUOTED = '"(?:[^"\\\\\\x00-\\x1F\\x7F]|\\\\[^\\x00-\\x1F\\x7F])*"';
const PLAIN = '[^"(),:;<>@\\[\\]\\\\\\x00-\\x1F\\x7F]*';
// No quantifier here can trade characters with its neighbour at length, so matching stays linear.
const SHAPE = new RegExp(`^(?:(${ADDRESS})|(?:${QUOTED}[ \\t]*|${PLAIN})<(${ADDRESS})>)$`);

/** RFC 5321 limits: a local part of 64 octets, a path of 256 (254 for the address itself). */
const MAX_LOCAL = 64;
const MAX_ADDRESS = 254;

// Reading a mailbox twice costs more than the rest of an email's checks, and senders repeat theirs (one
// `from` for a whole batch): readings are kept, the oldest dropped past this many strings.
const REMEMBERED = 4096;
const readings = new Map<string, Mailbox | undefined>();

/** The one mailbox the string names, or undefined when it is not exactly one valid mailbox. */
export function parseMailbox(value: string): Mailbox | undefined {
  let mailbox = readings.get(value);
  if (mailbox === undefined && !readings.has(value)) {
    mailbox = readMailbox(value);
    if (readings.size >= REMEMBERED) readings.delete(readings.keys().next().value!);
    readings.set(value, mailbox);
  }
  // A copy: nodemailer rewrites the address objects it is given.
  return mailbox && { ...mailbox };
}

function readMailbox(value: string): Mailbox | undefined {
  const shape = SHAPE.exec(value);
  if (!shape) return undefined;
  const address = (shape[1] ?? shape[2])!;
  if (address.length > MAX_ADDRESS || address.indexOf('@') > MAX_LOCAL) return undefined;
  const parsed = addressparser(value);
  const only = parsed.length === 1 ? parsed[0] : undefined;
  if (!only || only.group !== undefined || only.address !== address) return undefined;
  return { name: only.name, address };
}

/** A message naming the first string of `values` that is not exactly one mailbox, or undefined. */
export function invalidMailbox(field: string, values: readonly string[]): string | undefined {
  const bad = values.find((value) => parseMailbox(value) === undefined);
  return bad === undefined ? undefined : `Invalid \`${field}\` address ${quoted(bad)}: use \`address@domain\` or \`Display Name <address@domain>\`.`;
}

/** One address or a list of them, as the API takes them, as a list. */
export const mailboxList = (value: string | readonly string[] | undefined | null): string[] => (value === undefined || value === null ? [] : [value].flat());

/** A list of addresses as a column keeps it: JSON, or null for none. */
export const mailboxColumn = (list: readonly string[]): string | null => (list.length ? JSON.stringify(list) : null);
