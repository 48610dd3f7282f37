// The placeholder rules of a broadcast, and nothing else: filling a broadcast's parts for one
// recipient. Kept free of anything Node-only, so that the dashboard's preview imports this very code
// and shows what will be sent.
import { escapeHtml, parseTemplate, type Placeholder } from '../templates/render.ts';

export type Part = string | Placeholder;

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

/** A broadcast's content as one recipient gets it. */
export interface Personalized {
  subject: string;
  html: string | null;
  text: string | null;
}

/** The longest a personalized part may grow, in UTF-16 units: a short body repeating a long value could fill the memory. */
export const MAX_PERSONALIZED_LENGTH = 5_000_000;

/** A personalized part would be longer than MAX_PERSONALIZED_LENGTH. */
export class PersonalizedTooLong extends Error {}

/** A part of a broadcast (its subject, html or text) parsed into text and placeholders. */
export const parseParts = (source: string): Part[] => parseTemplate(source, { dotted: true }).parts;

/** The broadcast's content for one recipient; `unsubscribeUrl` fills `{{{RESEND_UNSUBSCRIBE_URL}}}`. */
export function personalize(prepared: PreparedBroadcast, recipient: Recipient, unsubscribeUrl: string): Personalized {
  const value = (name: string) => valueOf(name, recipient, unsubscribeUrl);
  return {
    subject: personalizeSubject(prepared, recipient, unsubscribeUrl),
    html: prepared.html && join(prepared.html, (name) => value(name), escapeHtml),
    text: prepared.text && join(prepared.text, value),
  };
}

/** The subject alone, as a list of emails shows it. */
export function personalizeSubject(prepared: PreparedBroadcast, recipient: Recipient, unsubscribeUrl: string): string {
  // One line: a value holding a line break or control character must not break the header.
  return join(prepared.subject, (name) => valueOf(name, recipient, unsubscribeUrl)?.replace(/[\x00-\x08\x0A-\x1F\x7F]+/g, ' '));
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
