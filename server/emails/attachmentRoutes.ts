// The files sent with an email: list them, retrieve one, each with a signed link to download it, and
// the download itself, which needs no API key (see attachmentLinks.ts). A download is always
// `application/octet-stream` and `Content-Disposition: attachment`: the bytes are whatever the sender
// gave, and this server's origin must never show them as a page.
import type { RequestHandler } from 'express';
import type { OperationHandler, PathParams, Schemas } from '../api.ts';
import { ApiError, invalid, notFound } from '../http/errors.ts';
import type { Handlers } from '../http/operationRouter.ts';
import { cursorOf } from '../http/paging.ts';
import type { ListedAttachment } from '../store/emails.ts';
import type { Store } from '../store/index.ts';
import type { Cursor } from '../store/keyset.ts';
import type { AttachmentLinks } from './attachmentLinks.ts';

export function attachmentHandlers(store: Store, links: AttachmentLinks): Handlers {
  const toSentAttachment = (attachment: ListedAttachment, now: Date): Schemas['SentAttachment'] => {
    const link = links.linkTo(attachment.email_id, attachment.id, now);
    return {
      object: 'attachment',
      id: attachment.id,
      filename: attachment.filename,
      size: attachment.size,
      content_type: attachment.content_type,
      content_disposition: attachment.content_id === null ? 'attachment' : 'inline',
      ...(attachment.content_id !== null && { content_id: attachment.content_id }),
      download_url: link.url,
      expires_at: link.expiresAt.toISOString(),
    };
  };

  const listEmailAttachments: OperationHandler<'listEmailAttachments'> = async (req, res) => {
    const cursor = cursorOf(req.query);
    const listed = await store.emails.attachmentsListed(req.params.email_id);
    // No attachments listed: an email without any, or no such email.
    if (listed.length === 0 && !(await store.emails.find(req.params.email_id))) throw notFound('Email');
    const { records, hasMore } = pageOf(listed, req.query.limit, cursor);
    const now = new Date();
    res.json({ object: 'list', has_more: hasMore, data: records.map((attachment) => toSentAttachment(attachment, now)) });
  };

  const getEmailAttachment: OperationHandler<'getEmailAttachment'> = async (req, res) => {
    const [attachment] = await store.emails.attachmentsListed(req.params.email_id, req.params.attachment_id);
    if (!attachment) throw notFound('Attachment');
    res.json(toSentAttachment(attachment, new Date()));
  };

  const downloadAttachment: RequestHandler<PathParams<'downloadAttachment'>> = async (req, res) => {
    const named = links.verify(req.params.token, new Date());
    const attachment = named && (await store.emails.attachment(named.emailId, named.attachmentId));
    if (!attachment) throw new ApiError(404, 'not_found', 'Download link not found; it may have expired. Retrieve the attachment again for a new one.');
    res.attachment(attachment.filename ?? undefined);
    res
      .type('application/octet-stream')
      .set({ 'X-Content-Type-Options': 'nosniff', 'Content-Security-Policy': "default-src 'none'; sandbox", 'Cache-Control': 'private, no-store' })
      .send(Buffer.from(attachment.content, 'base64'));
  };

  return { listEmailAttachments, getEmailAttachment, downloadAttachment };
}

/**
 * A page of an email's attachments (at most 50, read whole) in the order given: those after or before
 * the cursor's, `limit` of them when given, and whether more lie beyond in the direction of travel.
 */
function pageOf<T extends { id: string }>(all: T[], limit: number | undefined, cursor: Cursor): { records: T[]; hasMore: boolean } {
  const at = (id: string, parameter: string) => {
    const found = all.findIndex((item) => item.id === id);
    if (found < 0) throw invalid(`The \`${parameter}\` attachment does not exist.`);
    return found;
  };
  if ('before' in cursor && cursor.before) {
    const end = at(cursor.before, 'before');
    const start = limit === undefined ? 0 : Math.max(0, end - limit);
    return { records: all.slice(start, end), hasMore: start > 0 };
  }
  const start = 'after' in cursor && cursor.after ? at(cursor.after, 'after') + 1 : 0;
  const end = limit === undefined ? all.length : Math.min(all.length, start + limit);
  return { records: all.slice(start, end), hasMore: end < all.length };
}
