// Idempotency-Key on the send operations: the key is claimed (a unique row) before any work. The same
// key with the same body and validation mode within 24 hours replays the stored response and sends
// nothing; another body is 409 invalid_idempotent_request; a key whose first request is still in
// flight is 409 concurrent_idempotent_requests. A request refused before it created anything gives its
// key back.
import { createHash } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { resolveRef, type OpenApiDocument } from '../contract.ts';
import { ApiError } from '../errors.ts';
import type { Store } from '../store/index.ts';

const LIFETIME_MS = 24 * 60 * 60 * 1000;
/** An in-flight claim this old belongs to a process that died mid-request. */
const ABANDONED_MS = 5 * 60 * 1000;
const PARAMETER = '/components/parameters/IdempotencyKey';

export interface IdempotencyClaim {
  scope: string;
  key: string;
  /** Set once the response is stored with what the request created. */
  completed: boolean;
}

type RawBodyRequest = Request & { rawBody?: Buffer; openapi?: { openApiRoute?: string; schema?: { operationId?: string; parameters?: unknown[] } } };

/** For express.json's `verify`: keeps the bytes of bodies that carry an idempotency key, to fingerprint them. */
export function keepRawBody(req: RawBodyRequest, _res: unknown, body: Buffer): void {
  if (req.headers['idempotency-key'] !== undefined) req.rawBody = body;
}

export function idempotency(spec: OpenApiDocument, compile: (pointer: string) => ValidateFunction, store: Store, logger: Logger): RequestHandler {
  const parameter = resolveRef(spec, { $ref: `#${PARAMETER}` });
  const validKey = compile(`${PARAMETER}/schema`);
  const { minLength, maxLength } = resolveRef(spec, parameter.schema);
  // The operations that declare the header, read from the contract.
  const idempotent = new Set(
    Object.values(spec.paths).flatMap((item) =>
      Object.values(item as Record<string, any>)
        .filter((op) => op?.parameters?.some((p: { $ref?: string }) => p.$ref === `#${PARAMETER}`))
        .map((op) => op.operationId),
    ),
  );

  return async (req, res, next) => {
    const request = req as RawBodyRequest;
    const key = req.get(parameter.name as string);
    if (key === undefined || !idempotent.has(request.openapi?.schema?.operationId)) return next();
    if (!validKey(key)) {
      throw new ApiError(400, 'invalid_idempotency_key', `The \`${parameter.name}\` must be ${minLength} to ${maxLength} characters long.`);
    }
    const scope = `${req.method} ${request.openapi?.openApiRoute}`;
    const fingerprint = createHash('sha256')
      .update(request.rawBody ?? '')
      .update(`\n${req.get('x-batch-validation') ?? 'strict'}`)
      .digest('hex');
    const held = await store.idempotency.claim(scope, key, fingerprint, new Date(), LIFETIME_MS, ABANDONED_MS);
    if (held === 'claimed') {
      const claim: IdempotencyClaim = { scope, key, completed: false };
      res.locals.idempotency = claim;
      res.on('finish', () => {
        if (!claim.completed) store.idempotency.release(scope, key).catch((err) => logger.error({ err, scope, key }, 'releasing an idempotency key failed'));
      });
      return next();
    }
    if (held.fingerprint !== fingerprint) {
      throw new ApiError(409, 'invalid_idempotent_request', 'Same idempotency key used with a different request payload. Change your idempotency key or payload.');
    }
    if (held.state === 'in_flight') {
      throw new ApiError(409, 'concurrent_idempotent_requests', 'Same idempotency key used while original request is still in progress. Try the request again later.');
    }
    res.status(held.response_status!).json(JSON.parse(held.response_body!));
  };
}
