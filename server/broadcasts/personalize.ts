// A broadcast's subject, html and text, made for one contact. The broadcast keeps its placeholders;
// they are filled in when each email is delivered (and when it is read back): the contact's names and
// address (`{{{FIRST_NAME|there}}}`, `{{{contact.first_name}}}`), its properties by key (`{{{plan}}}`,
// `{{{contact.plan}}}`) and `{{{RESEND_UNSUBSCRIBE_URL}}}`. A placeholder with no value and no
// fallback becomes empty: one contact's missing name must not stop a broadcast.
//
// Each broadcast is parsed once (the template scanner, reads linear in its length), and its plain
// text, when it has none, is made once from its html; per recipient, rendering only joins parts.
import type { BroadcastRecord } from '../store/broadcasts.ts';
import { plainText } from '../delivery/message.ts';
import { escapeHtml, parseTemplate, type Placeholder } from '../templates/render.ts';

type Part = string | Placeholder;

/** A broadcast's content as parts, ready to be joined for each recipient. */
export interface PreparedBroadcast {
  subject: Part[];
  html: Part[] | null;
  /** null when the message has no plain-text part. */
  text: Part[] | null;
}

/** Whom a broadcast's email is for: its contact, or, once the contact is gone, the address alone. */
export interface Recipient {
  email: string;
  first_name: string | null;
  last_name: string | null;
  properties: Record<string, string>;
}

export interface Personalized {
  subject: string;
  html: string | null;
  text: string | null;
}

/** The longest a personalized part may grow, in UTF-16 units: a short body repeating a long value could fill the memory. */
export const MAX_PERSONALIZED_LENGTH = 5_000_000;

/** A personalized part would be longer than MAX_PERSONALIZED_LENGTH. */
export class PersonalizedTooLong extends Error {}

// Private-use characters around a placeholder's index stand in for it while html-to-text runs: they
// are not whitespace (so lines never wrap inside them) and have no case (headings are upper-cased).
const MARK_OPEN = '\uE000';
const MARK_CLOSE = '\uE001';
const MARKS = /[\uE000\uE001]/g;
const MARKED = /\uE000(\d+)\uE001/g;

export function prepareBroadcast(broadcast: Pick<BroadcastRecord, 'subject' | 'html' | 'text'>): PreparedBroadcast {
  const parse = (source: string) => parseTemplate(source, { dotted: true }).parts;
  const html = broadcast.html === null ? null : parse(broadcast.html);
  let text: Part[] | null;
  if (broadcast.text !== null) text = broadcast.text === '' ? null : parse(broadcast.text);
  else text = html && textFromHtml(html);
  return { subject: parse(broadcast.subject), html, text };
}

/** The plain text of an html template, made once, with its placeholders kept as placeholders. */
function textFromHtml(html: Part[]): Part[] {
  const placeholders: Placeholder[] = [];
  const marked = html
    .map((part) => (typeof part === 'string' ? part.replace(MARKS, '\uFFFD') : `${MARK_OPEN}${placeholders.push(part) - 1}${MARK_CLOSE}`))
    .join('');
  const converted = plainText(marked);
  const parts: Part[] = [];
  let from = 0;
  for (const match of converted.matchAll(MARKED)) {
    if (match.index > from) parts.push(converted.slice(from, match.index));
    parts.push(placeholders[Number(match[1])]!);
    from = match.index + match[0].length;
  }
  if (from < converted.length) parts.push(converted.slice(from));
  return parts;
}

/** The broadcast's content for one recipient; `unsubscribeUrl` fills `{{{RESEND_UNSUBSCRIBE_URL}}}`. */
export function personalize(prepared: PreparedBroadcast, recipient: Recipient, unsubscribeUrl: string): Personalized {
  const value = (name: string) => valueOf(name, recipient, unsubscribeUrl);
  return {
    // One line: a value holding a line break or control character must not break the header.
    subject: join(prepared.subject, (name) => value(name)?.replace(/[\x00-\x08\x0A-\x1F\x7F]+/g, ' ')),
    html: prepared.html && join(prepared.html, (name) => value(name), escapeHtml),
    text: prepared.text && join(prepared.text, value),
  };
}

function join(parts: Part[], value: (name: string) => string | undefined, escape: (s: string) => string = (s) => s): string {
  const out: string[] = [];
  let length = 0;
  for (const part of parts) {
    const chunk = typeof part === 'string' ? part : escape(value(part.name) ?? part.fallback ?? '');
    length += chunk.length;
    if (length > MAX_PERSONALIZED_LENGTH) throw new PersonalizedTooLong(`the personalized message is longer than ${MAX_PERSONALIZED_LENGTH} characters`);
    out.push(chunk);
  }
  return out.join('');
}

/** A placeholder's value for this recipient; an empty one counts as none, so that its fallback shows. */
function valueOf(name: string, recipient: Recipient, unsubscribeUrl: string): string | undefined {
  switch (name) {
    case 'FIRST_NAME':
    case 'contact.first_name':
      return recipient.first_name || undefined;
    case 'LAST_NAME':
    case 'contact.last_name':
      return recipient.last_name || undefined;
    case 'EMAIL':
    case 'contact.email':
      return recipient.email || undefined;
    case 'RESEND_UNSUBSCRIBE_URL':
      return unsubscribeUrl;
  }
  const key = name.startsWith('contact.') ? name.slice('contact.'.length) : name;
  // Own keys only: `{{{constructor}}}` is not a property of anyone.
  return Object.hasOwn(recipient.properties, key) ? recipient.properties[key] || undefined : undefined;
}

/** What a sending broadcast's emails need of it: its topic, and its content parsed. */
export interface SendingBroadcast {
  id: string;
  topic_id: string | null;
  prepared: PreparedBroadcast;
}

/**
 * Sending broadcasts by id, the least recently used dropped past `max`. A broadcast's content cannot
 * change once it is sending, and only a sending broadcast has emails, so an entry never goes stale.
 */
export class SendingBroadcasts {
  private readonly entries = new Map<string, SendingBroadcast>();

  constructor(private readonly max = 100) {}

  get(id: string): SendingBroadcast | undefined {
    const found = this.entries.get(id);
    if (found) {
      // Most recently used last, so that the first is the one to drop.
      this.entries.delete(id);
      this.entries.set(id, found);
    }
    return found;
  }

  add(record: Pick<BroadcastRecord, 'id' | 'topic_id' | 'subject' | 'html' | 'text'>): SendingBroadcast {
    const entry = { id: record.id, topic_id: record.topic_id, prepared: prepareBroadcast(record) };
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(record.id, entry);
    return entry;
  }
}
