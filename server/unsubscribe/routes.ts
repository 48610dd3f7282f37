// The pages behind a broadcast email's unsubscribe link; they need no API key, only a token the server
// signed. GET shows a page and changes nothing (link scanners and previews fetch every URL in a
// message). POST with `List-Unsubscribe=One-Click`, or without the page's `action`, unsubscribes at
// once from what the link names, as RFC 8058's one-click asks of mail clients, and again is harmless;
// the page's own form posts `action`, to record the reader's choice for each topic it shows or to leave
// all email. A token that does not verify, or names a contact that is gone, is a 404.
import express, { type RequestHandler, type Response } from 'express';
import type { PathParams } from '../api.ts';
import type { OpenApiDocument } from '../contract.ts';
import type { UnsubscribeTarget, UnsubscribeTokens } from '../broadcasts/unsubscribeToken.ts';
import { ApiError, invalid, notFound } from '../http/errors.ts';
import type { Store } from '../store/index.ts';
import { NotFound } from '../store/missing.ts';
import { UUID_FORM } from '../store/timeOrderedId.ts';
import type { TopicChoice } from '../store/topics.ts';
import { ACTION_FIELD, askPage, donePage, goneTopicPage, linkNotFoundPage, savedPage, TOPIC_FIELD_PREFIX } from './page.ts';
import type { Handlers } from '../http/operationRouter.ts';

const PAGE_HEADERS = {
  'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
  // Not framed by another site, whose page could lure the reader into pressing the button.
  'X-Frame-Options': 'DENY',
};

/** A one-click body is one short field, the page's form one per topic and `action`: anything past this is neither. */
const FORM_LIMIT = '16kb';

/** How many fields a form may have, and how long each may be: the contract's UnsubscribeForm. */
export function formBounds(spec: OpenApiDocument): { fields: number; fieldLength: number } {
  const form = spec.components.schemas!.UnsubscribeForm as { maxProperties: number; additionalProperties: { maxLength: number } };
  return { fields: form.maxProperties, fieldLength: form.additionalProperties.maxLength };
}

/** The URL-encoded form parser, for these pages only (multipart ones the validator reads itself). */
export const unsubscribeForm = (spec: OpenApiDocument): RequestHandler =>
  express.urlencoded({ extended: false, limit: FORM_LIMIT, parameterLimit: formBounds(spec).fields });

type Form = Record<string, unknown>;

export function unsubscribeHandlers(spec: OpenApiDocument, store: Store, tokens: UnsubscribeTokens): Handlers {
  // The page shows as many topics as its form can carry beside `action`.
  const shownTopics = formBounds(spec).fields - 1;
  /** What the token names; 404 unless this server signed it. */
  const targetOf = (token: string): UnsubscribeTarget => {
    const target = tokens.verify(token);
    if (!target) throw notFound('Unsubscribe link');
    return target;
  };
  const linkTopic = (target: UnsubscribeTarget) => (target.scope === 'topic' ? target.id : undefined);
  /** The contact the link names; 404 once it is gone. */
  const contactOf = async (target: UnsubscribeTarget) => {
    const contact = (await store.recipients.contacts([target.contactId])).get(target.contactId);
    if (!contact) throw notFound('Unsubscribe link');
    return contact;
  };

  const send = (res: Response, html: string, status = 200) => res.status(status).set(PAGE_HEADERS).set('Vary', 'Accept').type('html').send(html);
  /**
   * A person follows the link in a browser, which asks for HTML before anything else: a link not found
   * answers it with a page. Mail clients' one-click posts and API clients get the JSON error.
   */
  const asPage =
    <P,>(handler: RequestHandler<P, unknown, Form | undefined>): RequestHandler<P, unknown, Form | undefined> =>
    async (req, res, next) => {
      try {
        await handler(req, res, next);
      } catch (error) {
        const linkNotFound = error instanceof ApiError && error.statusCode === 404;
        if (!linkNotFound) throw error;
        res.set('Vary', 'Accept');
        if (req.accepts(['json', 'html']) !== 'html') throw error;
        send(res, linkNotFoundPage(), 404);
      }
    };

  const getUnsubscribePage: RequestHandler<PathParams<'getUnsubscribePage'>> = async (req, res) => {
    const target = targetOf(req.params.token);
    const contact = await contactOf(target);
    const topic = linkTopic(target);
    const { topics, more } = await store.topics.shownTo(contact.id, topic, shownTopics);
    // The link's topic comes first when it exists; missing, it was deleted.
    const linked = topics.find((t) => t.id === topic);
    const link = topic === undefined ? 'everything' : { topic: linked?.name, left: linked?.subscription === 'opt_out' };
    send(res, askPage({ link, unsubscribed: Boolean(contact.unsubscribed), topics, more }));
  };

  const unsubscribeOneClick: RequestHandler<PathParams<'unsubscribeOneClick'>, unknown, Form | undefined> = async (req, res) => {
    const target = targetOf(req.params.token);
    const form: Form = req.body ?? {};
    const topic = linkTopic(target);
    // A mail client's one-click says nothing but that: the link says what to leave.
    const action = form['List-Unsubscribe'] === 'One-Click' ? undefined : form[ACTION_FIELD];
    try {
      if (action === 'everything' || (action === undefined && topic === undefined)) {
        if (!(await store.recipients.unsubscribe(target.contactId, new Date()))) throw notFound('Unsubscribe link');
        return send(res, donePage('everything'));
      }
      if (action === undefined) {
        // Written only while the topic exists, so a deleted topic's link leaves no choice behind.
        const [left] = await store.topics.chooseShown(target.contactId, topic, [{ id: topic!, subscription: 'opt_out' }]);
        return send(res, left ? donePage({ topic: left.name }) : goneTopicPage());
      }
      const recorded = await store.topics.chooseShown(target.contactId, topic, choicesIn(form));
      send(res, savedPage(recorded, Boolean((await contactOf(target)).unsubscribed)));
    } catch (error) {
      if (error instanceof NotFound) throw notFound('Unsubscribe link');
      throw error;
    }
  };

  return { getUnsubscribePage: asPage(getUnsubscribePage), unsubscribeOneClick: asPage(unsubscribeOneClick) };
}

/**
 * The page's choices: a `topic:<id>` field per topic, `opt_in` or `opt_out`. Any other value is refused,
 * saving nothing, rather than answered with a page saying the choices are saved; a field that names no
 * topic's id, or of any other name, is ignored.
 */
function choicesIn(form: Form): TopicChoice[] {
  const choices: TopicChoice[] = [];
  for (const [name, value] of Object.entries(form)) {
    if (!name.startsWith(TOPIC_FIELD_PREFIX)) continue;
    if (value !== 'opt_in' && value !== 'opt_out') throw invalid(`The \`${name.slice(0, 100)}\` field must be \`opt_in\` or \`opt_out\`.`);
    const id = name.slice(TOPIC_FIELD_PREFIX.length);
    if (UUID_FORM.test(id)) choices.push({ id, subscription: value });
  }
  return choices;
}
