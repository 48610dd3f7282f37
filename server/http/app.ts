// The HTTP app, one way through:
//   request log → CORS (preflights answered here) → contract pages, metrics and the dashboard
//   → JSON body parser (nesting bounded; a refusal is held until the operation is known)
//   → HEAD taken as GET, exact paths, a batch's emails triaged (server/emails/batch.ts)
//   → express-openapi-validator, mounted whole as its documentation shows: routing (req.openapi, 404,
//     405), the request check, and the response check, live for every response from there on
//   → auth (key, rate limit, role), before which a refusal of the request check is not said
//     (server/http/heldRefusal.ts)
//   → the matched operation's handler (operationRouter.ts), which parses, calls the resource's
//     service (emails/send.ts and the like) and answers
//   → one error handler (twice: see errors.ts).
//
// One set of rules: the request check, the response check and server/contract.ts's schemaCompiler
// (batch emails, merged contact properties, the streamed contact list) all use AJV_OPTIONS and FORMATS
// from server/contract.ts, so what a request may carry is always what a response may return.
import express, { type Express, type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { Logger } from 'pino';
import { apiKeyHandlers } from '../apiKeys/routes.ts';
import { audienceHandlers } from '../audiences/routes.ts';
import { authenticate, authorize } from './auth.ts';
import { BroadcastMail, type UnsubscribeLinks } from '../broadcasts/mail.ts';
import { broadcastHandlers } from '../broadcasts/routes.ts';
import { bytesOf, type Config } from '../config.ts';
import { crossOrigin } from './cors.ts';
import { dashboardRoutes } from './dashboard.ts';
import type { SendingDomains } from '../domains/index.ts';
import { domainHandlers } from '../domains/routes.ts';
import { headAsGet } from './head.ts';
import { contactHandlers } from '../contacts/routes.ts';
import { toContact } from '../contacts/contact.ts';
import { streamedLists } from './streamedList.ts';
import { schemaCompiler, VALIDATOR_FORMATS, type OpenApiDocument } from '../contract.ts';
import { errorHandler } from './errors.ts';
import { bodyRefusal, holdingRefusal, jsonBody } from './jsonBody.ts';
import { holdRefusal, sayRefusal } from './heldRefusal.ts';
import { createMetrics } from '../metrics.ts';
import { looseIntegers } from './queryIntegers.ts';
import { requestLog } from './requestLog.ts';
import { refuseUnstorableText, withStorableText } from './storableText.ts';
import { batchTriage } from '../emails/batch.ts';
import { badIdempotencyKeys } from '../emails/idempotency.ts';
import { EmailSending } from '../emails/send.ts';
import { emailHandlers } from '../emails/routes.ts';
import { exactPaths, notServed, operationRouter } from './operationRouter.ts';
import { contractRoutes, healthHandlers, PAGE_PATHS } from './operations.ts';
import { rateLimit } from './rateLimit.ts';
import { memberList, segmentHandlers } from '../segments/routes.ts';
import { suppressionHandlers } from '../suppressions/routes.ts';
import { templateHandlers } from '../templates/routes.ts';
import { topicHandlers } from '../topics/routes.ts';
import type { Store } from '../store/index.ts';
import { formBounds, unsubscribeForm, unsubscribeHandlers } from '../unsubscribe/routes.ts';
import { attachmentHandlers } from '../emails/attachmentRoutes.ts';
import type { AttachmentLinks } from '../emails/attachmentLinks.ts';
import { webhookHandlers } from '../webhooks/routes.ts';

export interface AppOptions {
  spec: OpenApiDocument;
  store: Store;
  logger: Logger;
  config: Pick<Config, 'bodyLimit' | 'rateLimitPerSecond' | 'authFailuresPerMinute' | 'streamStallTimeoutMs' | 'corsOrigins' | 'metrics' | 'webhooks' | 'attachmentPaths'>;
  /** What unsubscribe links are made and checked with. */
  links: UnsubscribeLinks;
  /** What attachment download links are made and checked with. */
  attachmentLinks: AttachmentLinks;
  /** Sending domains: their operations, who may send from where, and their checks. */
  domains: SendingDomains;
  /** Mounted ahead of the resource routers; tests use it to plant a handler that breaks the contract. */
  extraRoutes?: express.Router;
}

export function createApp({ spec, store, logger, config, links, attachmentLinks, domains, extraRoutes }: AppOptions): Express {
  const compile = schemaCompiler(spec);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // The validator matches operations by these: a path is what the contract writes, letter for letter
  // (RFC 3986), and `/emails/` is not `/emails`, whose list it would have answered to `GET /emails/{id}`
  // with an empty id.
  app.set('strict routing', true);
  app.set('case sensitive routing', true);

  const metrics = config.metrics ? createMetrics(store, logger, PAGE_PATHS) : undefined;
  app.use(
    inSequence(
      requestLog(logger),
      metrics?.observe,
      crossOrigin(config.corsOrigins, spec),
      under(PAGE_PATHS, contractRoutes(metrics)),
      under(['/dashboard'], dashboardRoutes()),
      holdingRefusal(jsonBody(config.bodyLimit)),
    ),
  );
  // Mail clients post a form to an unsubscribe link (RFC 8058); no other operation takes one.
  app.use('/unsubscribe', unsubscribeForm(spec));
  const checkOf = (schema: string) => withStorableText(compile(`/components/schemas/${schema}`));
  const lists = streamedLists(compile, { stallTimeoutMs: config.streamStallTimeoutMs, logger });
  const streamContacts = lists.of('ContactList', toContact);
  const isFilename = compile('/components/schemas/Attachment/properties/filename');
  const attachmentPaths = { ...config.attachmentPaths, maxBytes: bytesOf(config.bodyLimit), isFilename: (name: string) => isFilename(name) };
  const listMembers = memberList(store, streamContacts);
  const contacts = contactHandlers(store, streamContacts, compile('/components/schemas/ContactProperties'), listMembers);
  app.use(inSequence(headAsGet, notServed, exactPaths, batchTriage(spec, checkOf('EmailBatch'), checkOf('BatchEmail'))));
  app.use(OpenApiValidator.middleware(validatorOptions(spec)), holdRefusal);
  app.use(
    inSequence(
      authenticate(spec, store, logger, config.authFailuresPerMinute),
      config.rateLimitPerSecond > 0 ? rateLimit(config.rateLimitPerSecond, store, logger, metrics?.countedLocally) : undefined,
      authorize(spec),
      sayRefusal([bodyRefusal, looseIntegers(spec), badIdempotencyKeys(spec, compile)]),
      refuseUnstorableText,
      extraRoutes,
      operationRouter(spec, {
        ...healthHandlers(store),
        ...contacts,
        ...segmentHandlers(store, streamContacts, lists),
        ...topicHandlers(store, lists),
        ...audienceHandlers(store, contacts, listMembers, lists),
        ...broadcastHandlers(store, domains.senders, lists),
        ...emailHandlers(store, new BroadcastMail(store, links), new EmailSending(store, domains.senders, attachmentPaths, logger)),
        ...attachmentHandlers(store, attachmentLinks),
        ...templateHandlers(store, lists),
        ...suppressionHandlers(store, lists),
        ...unsubscribeHandlers(spec, store, links.tokens),
        ...webhookHandlers(store, config.webhooks, lists),
        ...apiKeyHandlers(store, lists),
        ...domainHandlers(store, domains.domains, domains.checker, lists),
      }),
    ),
  );
  app.use(errorHandler(spec, logger));
  return app;
}

export function validatorOptions(spec: OpenApiDocument): Parameters<typeof OpenApiValidator.middleware>[0] {
  const form = formBounds(spec);
  return {
    apiSpec: structuredClone(spec) as never,
    // The contract is linted (redocly, strict) before it is bundled; checking it again here would cost
    // memory and time at start. A handler missing for an operation stops the start (operationRouter).
    validateApiSpec: false,
    validateRequests: { allowUnknownQueryParameters: false },
    validateResponses: true,
    validateSecurity: false, // authenticate() does it, with the contract's error names
    ignoreUndocumented: false,
    // Multipart bodies are read (by multer) only for the one operation that takes them, the one-click
    // unsubscribe: a few short fields, never a file, so a body cannot grow past a few kilobytes.
    fileUploader: { limits: { files: 0, fileSize: 0, parts: form.fields, fields: form.fields, fieldNameSize: 100, fieldSize: form.fieldLength, headerPairs: 20 } },
    ...VALIDATOR_FORMATS, // the formats schemaCompiler uses
  };
}

/**
 * Middleware run in order as one Express layer, as Express runs a layer each: a throw, a rejected
 * promise or `next(err)` goes to the error handler, past the rest. Express's router costs time for
 * each layer, matching a path none of these has.
 */
function inSequence(...handlers: (RequestHandler | undefined)[]): RequestHandler {
  const steps = handlers.filter((handler) => handler !== undefined);
  return (req, res, next) => {
    let at = 0;
    const step = (err?: unknown): void => {
      if (err) return next(err);
      const handler = steps[at++];
      if (!handler) return next();
      try {
        const result: unknown = handler(req, res, step);
        if (result instanceof Promise) result.catch((error: unknown) => step(error || new Error('Rejected promise')));
      } catch (error) {
        step(error);
      }
    };
    step();
  };
}

/**
 * A router of full paths, mounted at the root, that only requests under one of `prefixes` enter:
 * Express would otherwise try each of its routes against every request.
 */
function under(prefixes: readonly string[], router: RequestHandler): RequestHandler {
  return (req, res, next) => (prefixes.some((prefix) => req.url.startsWith(prefix)) ? router(req, res, next) : next());
}
