// Emails: send one (now or at `scheduled_at`), send a batch, list them, retrieve one with its last
// delivery event, and its events; reschedule or cancel a scheduled one. A broadcast's email keeps no
// body of its own: it reads back with the broadcast's content personalized for its contact (the list
// personalizes the subject alone).
import type { Request, RequestHandler, Response } from 'express';
import type { OperationHandler, PathParams, Schemas } from '../api.ts';
import type { BroadcastMail } from '../broadcasts/mail.ts';
import type { Personalized } from '../broadcasts/personalize.ts';
import { ApiError, invalid, notFound } from '../http/errors.ts';
import type { Handlers } from '../http/operationRouter.ts';
import { cursorOf, listing } from '../http/paging.ts';
import { sendTime } from '../schedule.ts';
import type { EmailRecord, ListedEmail, ScheduleRefusal } from '../store/emails.ts';
import type { Store } from '../store/index.ts';
import type { EmailSending, Sender } from './send.ts';
import { toTimeline } from './timeline.ts';

/** A page of the email log when no `limit` is given: unlike contacts, it grows without bound. */
const DEFAULT_PAGE = 20;

export function emailHandlers(store: Store, broadcastMail: BroadcastMail, sending: EmailSending): Handlers {
  const sender = (req: Request, res: Response): Sender => ({ apiKey: res.locals.apiKey!, idempotencyKey: req.get('Idempotency-Key') });

  const sendEmail: OperationHandler<'sendEmail'> = async (req, res) => {
    const { status, body } = await sending.send(req.body, sender(req, res));
    res.status(status).json(body);
  };

  const sendBatchEmails: OperationHandler<'sendBatchEmails'> = async (req, res) => {
    const { status, body } = await sending.sendBatch(req.body, res.locals.batch!, sender(req, res));
    res.status(status).json(body);
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
