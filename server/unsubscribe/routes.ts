// The pages behind a broadcast email's unsubscribe link; they need no API key, only a token the server
// signed. GET shows a page with a button and changes nothing (link scanners and previews fetch every
// URL in a message); POST unsubscribes at once, as RFC 8058's one-click asks of mail clients, and
// again is harmless. A token that does not verify, or names a contact that is gone, is a 404.
import express, { type RequestHandler, type Response } from 'express';
import type { PathParams } from '../api.ts';
import type { UnsubscribeTarget, UnsubscribeTokens } from '../broadcasts/unsubscribeToken.ts';
import { notFound } from '../errors.ts';
import type { Store } from '../store/index.ts';
import { askPage, donePage, type Leaving } from './page.ts';
import type { Handlers } from '../operationRouter.ts';

const PAGE_HEADERS = {
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  // Not framed by another site, whose page could lure the reader into pressing the button.
  'X-Frame-Options': 'DENY',
};

/** A one-click body is one short field: anything past this is not one. */
const FORM_LIMIT = '16kb';

/** The URL-encoded form parser, for these pages only (multipart ones the validator reads itself). */
export const unsubscribeForm = (): RequestHandler => express.urlencoded({ extended: false, limit: FORM_LIMIT, parameterLimit: 20 });

export function unsubscribeHandlers(store: Store, tokens: UnsubscribeTokens): Handlers {
  /** What the token names; 404 unless this server signed it. */
  const targetOf = (token: string): UnsubscribeTarget => {
    const target = tokens.verify(token);
    if (!target) throw notFound('Unsubscribe link');
    return target;
  };

  const leaving = async (target: UnsubscribeTarget): Promise<Leaving> => {
    if (target.scope === 'broadcast') return 'everything';
    return { topic: (await store.recipients.topicName(target.id)) ?? 'this topic' };
  };

  const send = (res: Response, html: string) => res.status(200).set(PAGE_HEADERS).type('html').send(html);

  const getUnsubscribePage: RequestHandler<PathParams<'getUnsubscribePage'>> = async (req, res) => {
    const target = targetOf(req.params.token);
    if (!(await store.recipients.contacts([target.contactId])).has(target.contactId)) throw notFound('Unsubscribe link');
    send(res, askPage(await leaving(target)));
  };

  const unsubscribeOneClick: RequestHandler<PathParams<'unsubscribeOneClick'>> = async (req, res) => {
    const target = targetOf(req.params.token);
    const now = new Date();
    const done = target.scope === 'topic' ? await store.recipients.optOut(target.contactId, target.id, now) : await store.recipients.unsubscribe(target.contactId, now);
    if (!done) throw notFound('Unsubscribe link');
    send(res, donePage(await leaving(target)));
  };

  return { getUnsubscribePage, unsubscribeOneClick };
}
