// The HTTP app: request log → contract pages → JSON body parser → the validator's routing (404, 405)
// → response checking switched on → auth (key, rate limit, role) → idempotency → batch triage → the validator's
// request check → one router per resource → one error handler.
import { randomUUID } from 'node:crypto';
import express, { type Express, type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { Logger } from 'pino';
import { authenticate, authorize } from './auth.ts';
import { broadcastRoutes } from './broadcasts/routes.ts';
import type { Config } from './config.ts';
import { contactRoutes } from './contacts/routes.ts';
import { contactStream } from './contacts/stream.ts';
import { schemaCompiler, type OpenApiDocument } from './contract.ts';
import { errorHandler } from './errors.ts';
import { batchValidation } from './emails/batch.ts';
import { idempotency, keepRawBody } from './emails/idempotency.ts';
import { emailRoutes } from './emails/routes.ts';
import { contractRoutes, healthRoutes } from './operations.ts';
import { rateLimit } from './rateLimit.ts';
import { templateRoutes } from './templates/routes.ts';
import type { Store } from './store/index.ts';

export interface AppOptions {
  spec: OpenApiDocument;
  store: Store;
  logger: Logger;
  config: Pick<Config, 'bodyLimit' | 'rateLimitPerSecond'>;
  /** Mounted ahead of the resource routers; tests use it to plant a handler that breaks the contract. */
  extraRoutes?: express.Router;
}

export function createApp({ spec, store, logger, config, extraRoutes }: AppOptions): Express {
  const compile = schemaCompiler(spec);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.use(requestLog(logger), stableQuery);
  app.use(contractRoutes());
  app.use(express.json({ limit: config.bodyLimit, verify: keepRawBody }));
  const validator = OpenApiValidator.middleware({
    apiSpec: structuredClone(spec) as never,
    validateApiSpec: false, // startServer() has checked it already; checking twice costs memory at start
    validateRequests: { allowUnknownQueryParameters: false },
    validateResponses: true,
    validateSecurity: false, // authenticate() below does it, with the error names DESIGN.md gives
    ignoreUndocumented: false,
  });
  // The validator's middlewares are taken apart so that auth, idempotency and batch triage run after it
  // has matched the operation and before it checks the request, and so that every response from then
  // on, an auth error or a permissive batch answered early included, is checked against the contract.
  const part = (name: string) => {
    const found = validator.find((middleware) => middleware.name === name);
    if (!found) throw new Error(`express-openapi-validator has no ${name} any more; revisit createApp`);
    return found;
  };
  const checkRequest = part('requestMiddleware');
  const checkResponse = part('responseMiddleware');
  app.use(validator.filter((middleware) => middleware !== checkRequest && middleware !== checkResponse));
  app.use(checkResponse);
  app.use(authenticate(spec, store));
  if (config.rateLimitPerSecond > 0) app.use(rateLimit(config.rateLimitPerSecond, store, logger));
  app.use(authorize(spec));
  app.use(idempotency(spec, compile, store, logger), batchValidation(spec, store, compile('/components/schemas/OutgoingEmail')));
  app.use(checkRequest);
  if (extraRoutes) app.use(extraRoutes);
  app.use('/health', healthRoutes(store));
  app.use('/contacts', contactRoutes(store, contactStream(compile('/components/schemas/Contact'))));
  app.use('/broadcasts', broadcastRoutes(store));
  app.use('/emails', emailRoutes(store));
  app.use('/templates', templateRoutes(store));
  app.use(errorHandler(spec, logger));
  return app;
}

/** One JSON log line per request, tied to its x-request-id, which error logs repeat. */
function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const reqId = req.get('x-request-id') || randomUUID();
    const started = performance.now();
    res.locals.reqId = reqId;
    res.setHeader('x-request-id', reqId);
    res.on('finish', () => {
      logger.info({ reqId, method: req.method, url: req.originalUrl, status: res.statusCode, ms: Math.round(performance.now() - started) }, 'request');
    });
    next();
  };
}

/**
 * Express 5 parses req.query anew on every read, so the validator's type coercion (limit "10" → 10)
 * would be lost; pinning the parsed object keeps the validated, coerced values for the handlers.
 */
const stableQuery: RequestHandler = (req, _res, next) => {
  Object.defineProperty(req, 'query', { value: req.query, writable: true, enumerable: true, configurable: true });
  next();
};
