// A broadcast's subject, html and text, made for one contact. The broadcast keeps its placeholders;
// they are filled in when each email is delivered (and when it is read back): the contact's names and
// address (`{{{FIRST_NAME|there}}}`, `{{{contact.first_name}}}`), its properties by key (`{{{plan}}}`,
// `{{{contact.plan}}}`) and `{{{RESEND_UNSUBSCRIBE_URL}}}`. A placeholder with no value and no
// fallback becomes empty: one contact's missing name must not stop a broadcast.
//
// Each broadcast is parsed once (the template scanner, reads linear in its length), and its plain
// text, when it has none, is made once from its html; per recipient, rendering only joins parts
// (./placeholders.ts, which the dashboard's preview shares).
import type { BroadcastRecord } from '../store/broadcasts.ts';
import { plainText } from '../delivery/message.ts';
import { escapeHtml, type Placeholder } from '../templates/render.ts';
import { parseParts, type Part, type PreparedBroadcast } from './placeholders.ts';

export { personalize, personalizeSubject, PersonalizedTooLong, type Personalized, type PreparedBroadcast, type Recipient } from './placeholders.ts';

// Private-use characters around a placeholder's index stand in for it while html-to-text runs: they
// are not whitespace, so lines never wrap inside them.
const MARK_OPEN = '\uE000';
const MARK_CLOSE = '\uE001';
const MARKS = /[\uE000\uE001]/g;
const MARKED = /\uE000(\d+)\uE001/g;

export function prepareBroadcast(broadcast: Pick<BroadcastRecord, 'subject' | 'html' | 'text'> & { preview_text?: string | null }): PreparedBroadcast {
  const html = broadcast.html ? parseParts(broadcast.html) : null; // none when empty, as for single emails
  let text: Part[] | null;
  if (broadcast.text !== null) text = broadcast.text === '' ? null : parseParts(broadcast.text);
  else text = html && textFromHtml(html); // without the preview text: it is the inbox's, not the message's
  return { subject: parseParts(broadcast.subject), html: html && withPreviewText(html, broadcast.preview_text), text };
}

/**
 * The preview text as mail clients find it: the first text of the html's body, in an element they
 * show in the inbox list but not in the message. Its placeholders are filled as the body's are: the
 * inbox shows it beside the subject, which is personalized too.
 */
function withPreviewText(html: Part[], preview: string | null | undefined): Part[] {
  if (!preview) return html;
  const hidden: Part[] = [
    '<div style="display:none;max-height:0;max-width:0;opacity:0;overflow:hidden;mso-hide:all">',
    ...parseParts(preview).map((part) => (typeof part === 'string' ? escapeHtml(part) : part)),
    '</div>',
  ];
  for (const [at, part] of html.entries()) {
    if (typeof part !== 'string') continue;
    const body = BODY_START.exec(part);
    if (!body) continue;
    const end = body.index + body[0].length;
    return [...html.slice(0, at), part.slice(0, end), ...hidden, part.slice(end), ...html.slice(at + 1)];
  }
  return [...hidden, ...html];
}

const BODY_START = /<body\b[^>]*>/i;

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




/** What a sending broadcast's emails need of it: its topic, and its content parsed. */
export interface SendingBroadcast {
  id: string;
  segment_id: string;
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

  add(record: Pick<BroadcastRecord, 'id' | 'segment_id' | 'topic_id' | 'subject' | 'html' | 'text' | 'preview_text'>): SendingBroadcast {
    const entry = { id: record.id, segment_id: record.segment_id, topic_id: record.topic_id, prepared: prepareBroadcast(record) };
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(record.id, entry);
    return entry;
  }
}
