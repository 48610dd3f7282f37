// Turns one email of a send request into the row the outbox keeps, applying the rules the schema
// cannot state: templates (published, rendered, overridable defaults), required sender and subject,
// exactly one mailbox per address string, custom header names unique regardless of letter case,
// each inline attachment's content id its own. Returns the row, or a message saying what is wrong.
import { createRequire } from 'node:module';
import type { Schemas } from '../api.ts';
import type { EmailAttachment, EmailRecord } from '../store/emails.ts';
import type { AttachmentWithContent } from './attachmentPath.ts';
import type { TemplateRecord } from '../store/templates.ts';
import { timeOrderedId } from '../store/timeOrderedId.ts';
import { publishedTemplate, renderPart } from '../templates/published.ts';
import { RenderError, typeMismatch, variableMap } from '../templates/render.ts';
import { quoted } from '../quoted.ts';
import { invalidMailbox, mailboxColumn, mailboxList as list } from './mailbox.ts';

export type OutgoingEmail = Schemas['OutgoingEmail'];
export type FindTemplate = (idOrAlias: string) => Promise<TemplateRecord | undefined>;

/** `scheduledAt`, a time to come (server/schedule.ts), leaves the email `scheduled` until then. */
export async function composeEmail(item: OutgoingEmail, findTemplate: FindTemplate, now: Date, scheduledAt: string | null = null): Promise<EmailRecord | string> {
  let { from, subject, reply_to: replyTo } = item;
  let html = item.html ?? null;
  let text = item.text ?? null;

  if (item.template) {
    const template = await findTemplate(item.template.id);
    if (!template) return `Template ${quoted(item.template.id)} not found.`;
    if (!template.published) return `Template ${quoted(item.template.id)} is not published; publish it before sending with it.`;
    const published = publishedTemplate(template);
    const values = variableMap(item.template.variables);
    const mismatch = typeMismatch(published.variables, values);
    if (mismatch) return mismatch;
    try {
      subject ??= renderPart(template, 'subject', values) ?? undefined;
      html = renderPart(template, 'html', values);
      text = renderPart(template, 'text', values);
    } catch (error) {
      if (error instanceof RenderError) return error.message;
      throw error;
    }
    from ??= published.from ?? undefined;
    replyTo ??= published.reply_to ?? undefined;
  }

  if (!from) return 'Missing `from` field.';
  if (!subject) return 'Missing `subject` field.';
  if (!html && !text) return 'Missing `html` or `text` field.';
  const [to, cc, bcc, replyTos] = [list(item.to), list(item.cc), list(item.bcc), list(replyTo)];
  for (const [field, addresses] of [['from', [from]], ['to', to], ['cc', cc], ['bcc', bcc], ['reply_to', replyTos]] as const) {
    const bad = invalidMailbox(field, addresses);
    if (bad) return bad;
  }
  const repeated = repeatedHeader(item.headers);
  if (repeated) return repeated;
  const inline = (item.attachments ?? []).flatMap((attachment) => (attachment.content_id === undefined ? [] : [attachment.content_id]));
  const twice = inline.find((id, at) => inline.indexOf(id) !== at);
  if (twice !== undefined) return `The \`content_id\` ${quoted(twice)} is given to more than one attachment: each inline attachment needs its own.`;

  const at = now.toISOString();
  return {
    id: timeOrderedId(),
    from_address: from,
    to_addresses: JSON.stringify(to),
    cc: mailboxColumn(cc),
    bcc: mailboxColumn(bcc),
    reply_to: mailboxColumn(replyTos),
    subject,
    html,
    text,
    headers: item.headers && Object.keys(item.headers).length ? JSON.stringify(item.headers) : null,
    tags: item.tags ? JSON.stringify(item.tags) : null,
    last_event: scheduledAt ? 'scheduled' : 'queued',
    attempts: 0,
    scheduled_at: scheduledAt,
    next_attempt_at: scheduledAt ?? at,
    message_id: null,
    last_error: null,
    created_at: at,
    updated_at: at,
    broadcast_id: null,
    contact_id: null,
  };
}

// Loaded at the first attachment without a media type: its table of types is large, and most servers never need it.
let lookup: ((filename: string) => string | false) | undefined;
const mediaTypeOf = (filename: string | undefined) =>
  (filename && (lookup ??= (createRequire(import.meta.url)('mime-types') as typeof import('mime-types')).lookup)(filename)) || 'application/octet-stream';

/** The attachments of a composed email as stored, each with its media type, given or derived from the filename. */
export function attachmentsOf(emailId: string, given: AttachmentWithContent[] | undefined): EmailAttachment[] {
  return (given ?? []).map((attachment, position) => ({
    id: timeOrderedId(),
    email_id: emailId,
    position,
    filename: attachment.filename ?? null,
    content_type: attachment.content_type ?? mediaTypeOf(attachment.filename),
    content_id: attachment.content_id ?? null,
    // The contract holds the content to padded base64: four characters per three bytes, less the padding.
    size: (attachment.content.length / 4) * 3 - (attachment.content.endsWith('==') ? 2 : attachment.content.endsWith('=') ? 1 : 0),
    content: attachment.content,
  }));
}

/** Header names are case-insensitive: `X-Ref` and `x-ref` would be one header given twice. */
function repeatedHeader(headers: OutgoingEmail['headers']): string | undefined {
  const seen = new Map<string, string>();
  for (const name of Object.keys(headers ?? {})) {
    const first = seen.get(name.toLowerCase());
    if (first !== undefined) return `The header ${quoted(name)} repeats ${quoted(first)}: header names are case-insensitive, give each once.`;
    seen.set(name.toLowerCase(), name);
  }
  return undefined;
}

/** A template lookup that asks the store once per id or alias within one request. */
export function memoized(find: FindTemplate): FindTemplate {
  const seen = new Map<string, Promise<TemplateRecord | undefined>>();
  return (idOrAlias) => {
    if (!seen.has(idOrAlias)) seen.set(idOrAlias, find(idOrAlias));
    return seen.get(idOrAlias)!;
  };
}
