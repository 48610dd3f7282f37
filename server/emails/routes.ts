// Emails: send one (now or at `scheduled_at`), send a batch, list them, retrieve one with its last
// delivery event, and its events; reschedule or cancel a scheduled one. A broadcast's email keeps no
// body of its own: it reads back with the broadcast's content personalized for its contact (the list
// personalizes the subject alone).
import type { RequestHandler, Response } from 'express';
import type { OperationHandler, PathParams, Schemas } from '../api.ts';
import type { BroadcastMail } from '../broadcasts/mail.ts';
import type { Personalized } from '../broadcasts/personalize.ts';
import { ApiError, invalid, notFound, refusedEmail } from '../http/errors.ts';
import type { EmailAttachment, EmailRecord, ListedEmail, ScheduleRefusal } from '../store/emails.ts';
import { ClaimLostError } from '../store/idempotency.ts';
import type { Store } from '../store/index.ts';
import { cursorOf, listing } from '../http/paging.ts';
import { sendTime } from '../schedule.ts';
import { withFetchedContent, type AttachmentPathOptions } from './attachmentPath.ts';
import { composeBatch } from './batch.ts';
import { attachmentsOf, composeEmail, memoized } from './compose.ts';
import { concurrentRequest } from './idempotency.ts';
import { toTimeline } from './timeline.ts';
import type { Senders } from '../domains/senders.ts';
import type { Handlers } from '../http/operationRouter.ts';

/** A page of the email log when no `limit` is given: unlike contacts, it grows without bound. */
const DEFAULT_PAGE = 20;

export function emailHandlers(store: Store, broadcastMail: BroadcastMail, attachmentPaths: AttachmentPathOptions, senders: Senders): Handlers {
  /** Commits the emails (and the response, for an idempotency key) before answering. */
  async function accept<Body>(res: Response, records: EmailRecord[], body: Body, attachments?: EmailAttachment[]): Promise<Body> {
    const claim = res.locals.idempotency;
    await store.acceptEmails(records, claim && { claim, status: 200, body }, attachments).catch((error) => {
      throw error instanceof ClaimLostError ? concurrentRequest() : error; // another request took the key over
    });
    if (claim) claim.completed = true;
    return body;
  }

  const sendEmail: OperationHandler<'sendEmail'> = async (req, res) => {
    const now = new Date();
    const scheduledAt = await sendTime(req.body.scheduled_at, now);
    const composed = await composeEmail(req.body, memoized((id) => store.templates.find(id)), now, scheduledAt);
    if (typeof composed === 'string') throw refusedEmail(composed);
    await senders.check([composed.from_address], res.locals.apiKey);
    const attachments = await withFetchedContent(req.body.attachments, attachmentPaths);
    res.json(await accept(res, [composed], { id: composed.id }, attachmentsOf(composed.id, attachments)));
  };

  const sendBatchEmails: OperationHandler<'sendBatchEmails'> = async (req, res) => {
    const triaged = res.locals.batch!;
    const { accepted, errors } = await composeBatch(req.body, triaged, memoized((id) => store.templates.find(id)), new Date());
    await senders.check(accepted.map((email) => email.from_address), res.locals.apiKey);
    const data = accepted.map(({ id }) => ({ id }));
    const body = triaged.mode === 'permissive' ? { data, errors } : { data };
    // Every email refused by the rules no schema states: nothing to store, and nothing to wait for.
    res.json(accepted.length === 0 ? body : await accept(res, accepted, body));
  };

  const getEmail: OperationHandler<'getEmail'> = async (req, res) => {
    const record = await store.emails.find(req.params.email_id);
    if (!record) throw notFound('Email');
    res.json(toEmail(record, record.broadcast_id === null ? undefined : await broadcastMail.forReading(record)));
  };

  const listEmails: OperationHandler<'listEmails'> = async (req, res) => {
    const { limit = DEFAULT_PAGE, last_event } = req.query;
    const page = await listing('email', () => store.emails.page(limit, cursorOf(req.query), last_event));
    const subjects = await broadcastMail.subjectsForReading(page.records);
    res.json({ object: 'list', has_more: page.hasMore, data: page.records.map((record) => toEmailSummary(record, subjects.get(record.id))) });
  };

  // Only the capture store keeps the message as it was delivered; a relay's copy is the relay's.
  const getEmailRaw: RequestHandler<PathParams<'getEmailRaw'>> = async (req, res) => {
    const raw = await store.emails.capturedMessage(req.params.email_id);
    if (raw === undefined) {
      if (!(await store.emails.find(req.params.email_id))) throw notFound('Email');
      throw new ApiError(404, 'not_found', 'No raw message is kept for this email; only emails delivered to the capture store have one.');
    }
    res.type('message/rfc822').send(raw);
  };

  const listEmailEvents: OperationHandler<'listEmailEvents'> = async (req, res) => {
    const record = await store.emails.find(req.params.email_id);
    if (!record) throw notFound('Email');
    res.json(toTimeline(record, await store.events.forEmail(record.id)));
  };

  const updateEmail: OperationHandler<'updateEmail'> = async (req, res) => {
    const now = new Date();
    const refusal = await store.emails.reschedule(req.params.email_id, await sendTime(req.body.scheduled_at, now), now);
    if (refusal) throw scheduleRefused(refusal, 'rescheduled');
    res.json({ object: 'email', id: req.params.email_id });
  };

  const cancelEmail: OperationHandler<'cancelEmail'> = async (req, res) => {
    const refusal = await store.emails.cancel(req.params.email_id, new Date());
    if (refusal) throw scheduleRefused(refusal, 'canceled');
    res.json({ object: 'email', id: req.params.email_id });
  };

  return { listEmails, sendEmail, sendBatchEmails, getEmail, listEmailEvents, getEmailRaw, updateEmail, cancelEmail };
}

function scheduleRefused(refusal: ScheduleRefusal, move: 'rescheduled' | 'canceled'): ApiError {
  switch (refusal.refused) {
    case 'not_found':
      return notFound('Email');
    case 'last_event':
      return invalid(`The email is \`${refusal.last_event}\`; only a \`scheduled\` email can be ${move}.`);
    case 'sending':
      return invalid(`The email is being sent; it can no longer be ${move}.`);
  }
}

function toEmailSummary(record: ListedEmail, personalizedSubject: string | undefined): Schemas['EmailSummary'] {
  const list = (json: string | null) => (json === null ? null : JSON.parse(json));
  return {
    id: record.id,
    from: record.from_address,
    to: JSON.parse(record.to_addresses),
    subject: personalizedSubject ?? record.subject,
    cc: list(record.cc),
    bcc: list(record.bcc),
    reply_to: list(record.reply_to),
    created_at: record.created_at,
    scheduled_at: record.scheduled_at,
    last_event: record.last_event,
    message_id: record.message_id,
  };
}

function toEmail(record: EmailRecord, personalized: Personalized | undefined): Schemas['Email'] {
  const list = (json: string | null) => (json === null ? null : JSON.parse(json));
  const content = personalized ?? record;
  return {
    object: 'email',
    id: record.id,
    broadcast_id: record.broadcast_id,
    from: record.from_address,
    to: JSON.parse(record.to_addresses),
    subject: content.subject,
    cc: list(record.cc),
    bcc: list(record.bcc),
    reply_to: list(record.reply_to),
    html: content.html,
    text: content.text === '' ? null : content.text,
    ...(record.tags !== null && { tags: JSON.parse(record.tags) }),
    created_at: record.created_at,
    scheduled_at: record.scheduled_at,
    last_event: record.last_event,
    message_id: record.message_id,
  };
}
