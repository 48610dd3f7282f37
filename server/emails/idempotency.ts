// Idempotency-Key on the send operations: the key is claimed (a unique row) before any work. The same
// key with the same body and validation mode within 24 hours replays the stored response and sends
// nothing; another body is 409 invalid_idempotent_request; a key whose first request is still in
// flight is 409 concurrent_idempotent_requests. A request that ends without creating anything gives its
// key back. Keys belong to their owner: this server has one account and no teams, so the owner is the
// API key that sent the request, and two keys using the same Idempotency-Key never meet.
import { createHash } from 'node:crypto';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { operationsOf, resolveRef, type OpenApiDocument } from '../contract.ts';
import { ApiError } from '../http/errors.ts';
import { givenMoreThanOnce } from '../http/repeatedHeader.ts';
import type { HeldClaim } from '../store/idempotency.ts';
import type { Store } from '../store/index.ts';
import { failureLevel } from '../store/database.ts';

const LIFETIME_MS = 24 * 60 * 60 * 1000;
/**
 * The last resort: an in-flight claim this old gives way even though its holder looks alive (stuck, or
 * a reused pid). Claims of dead holders give way at once; a stale holder that wakes up cannot commit.
 */
const ABANDONED_MS = 5 * 60 * 1000;
const PARAMETER = '/components/parameters/IdempotencyKey';

export interface IdempotencyClaim extends HeldClaim {
  /** Set once the response is stored with what the request created. */
  completed: boolean;
}

export const concurrentRequest = () =>
  new ApiError(409, 'concurrent_idempotent_requests', 'Same idempotency key used while original request is still in progress. Try the request again later.');

/**
 * `claim` holds a request's key (after auth: keys are the API key's own); `refuseFirst`, after the
 * request check, says what is wrong with the key itself ahead of anything the check found.
 */
export function idempotency(spec: OpenApiDocument, compile: (pointer: string) => ValidateFunction, store: Store, logger: Logger): { claim: RequestHandler; refuseFirst: ErrorRequestHandler } {
  const parameter = resolveRef(spec, { $ref: `#${PARAMETER}` });
  const validKey = compile(`${PARAMETER}/schema`);
  const { minLength, maxLength } = resolveRef(spec, parameter.schema);
  // The operations that declare the header, read from the contract.
  const idempotent = new Set(
    operationsOf(spec)
      .filter(({ operation }) => operation.parameters?.some((p: { $ref?: string }) => p.$ref === `#${PARAMETER}`))
      .map(({ operation }) => operation.operationId),
  );

  const HEADER = (parameter.name as string).toLowerCase();
  const keyRefusal = (req: Request) => {
    const key = req.get(parameter.name as string);
    if (key === undefined || !idempotent.has(req.openapi?.schema?.operationId)) return undefined;
    // Node joins a header given twice into one value, `a, b`: a key of its own the client never sent.
    if (givenMoreThanOnce(req.rawHeaders, HEADER)) {
      return new ApiError(400, 'invalid_idempotency_key', `The \`${parameter.name}\` is given more than once; give it once.`);
    }
    if (!validKey(key)) return new ApiError(400, 'invalid_idempotency_key', `The \`${parameter.name}\` must be ${minLength} to ${maxLength} characters long.`);
    return undefined;
  };
  const refuseFirst: ErrorRequestHandler = (err, req, _res, next) => next(keyRefusal(req) ?? err);
  const claim: RequestHandler = async (req, res, next) => {
    const key = req.get(parameter.name as string);
    if (key === undefined || !idempotent.has(req.openapi?.schema?.operationId)) return next();
    const refusal = keyRefusal(req);
    if (refusal) throw refusal;
    const scope = `${req.method} ${req.openapi?.openApiRoute}`;
    const owner = res.locals.apiKey?.id;
    if (!owner) throw new Error('idempotency runs after authentication');
    const fingerprint = createHash('sha256')
      .update(canonicalJson(res.locals.batch?.given ?? req.body))
      .update(`\n${req.get('x-batch-validation') ?? 'strict'}`)
      .digest('hex');
    const result = await store.idempotency.claim({ owner, scope, key }, fingerprint, new Date(), LIFETIME_MS, ABANDONED_MS);
    if ('claim' in result) {
      const claim: IdempotencyClaim = { ...result.claim, completed: false };
      res.locals.idempotency = claim;
      settleWhenEnded(res, claim, store, logger);
      return next();
    }
    const { held } = result;
    if (held.fingerprint !== fingerprint) {
      throw new ApiError(409, 'invalid_idempotent_request', 'Same idempotency key used with a different request payload. Change your idempotency key or payload.');
    }
    if (held.state === 'in_flight') throw concurrentRequest();
    res.status(held.response_status!).json(JSON.parse(held.response_body!));
  };
  return { claim, refuseFirst };
}

/**
 * The parsed body as JSON with every object's keys in order: the same request sent again by a client
 * that serializes it another way (its keys in another order, other spacing) is the same request, as
 * JSON says; a different value anywhere is another.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const object = value as Record<string, unknown>;
    return `{${Object.keys(object).sort().map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Settles the claim when the handler ends the response: kept if the request committed what it created,
 * else given back, before the response leaves, so that a client told "no" may retry at once. Not on
 * 'finish' (never emitted once the client has gone) nor on 'close' (the client may go while the handler
 * is still storing the emails).
 */
function settleWhenEnded(res: Response, claim: IdempotencyClaim, store: Store, logger: Logger): void {
  const end = res.end;
  res.end = function (this: Response, ...args: unknown[]) {
    res.end = end;
    store.idempotency.settled(claim);
    if (claim.completed) return end.apply(this, args as never);
    store.idempotency
      .release(claim)
      .catch((err) => logger[failureLevel(err)]({ err, reqId: res.locals.reqId, key: claim.key }, 'releasing an idempotency key failed'))
      .finally(() => end.apply(this, args as never));
    return this;
  } as Response['end'];
}
