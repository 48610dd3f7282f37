// Idempotency-Key on the send operations: the key is claimed (a unique row) before any work. The same
// key with the same body and validation mode within 24 hours replays the stored response and sends
// nothing; another body is 409 invalid_idempotent_request; a key whose first request is still in
// flight is 409 concurrent_idempotent_requests. A request that ends without creating anything gives its
// key back. Keys belong to their owner: this server has one account and no teams, so the owner is the
// API key that sent the request, and two keys using the same Idempotency-Key never meet.
import { createHash } from 'node:crypto';
import type { Request } from 'express';
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

/** What an operation answers: its status and its JSON body, as stored with a key to replay. */
export interface Answer<Body> {
  status: number;
  body: Body;
}

export const concurrentRequest = () =>
  new ApiError(409, 'concurrent_idempotent_requests', 'Same idempotency key used while original request is still in progress. Try the request again later.');

/** The same request sent again, under the same key: what it is, as far as its key goes. */
export interface IdempotentRequest {
  /** Who sent it: keys belong to the API key that sent them. */
  owner: string;
  /** The operation, as `POST /emails`. */
  scope: string;
  key: string;
  /** What must be the same for a replay: the body as sent, and a batch's validation mode. */
  payload: unknown;
  mode?: 'strict' | 'permissive';
}

/**
 * Runs `work` once per key: the key is claimed first, and the answer `work` stores with it (by
 * completing the claim in its commit) is replayed to the same request sent again. A claim `work` did
 * not complete, because it failed or created nothing, is given back before this returns, so that a
 * client told "no" may retry at once.
 */
export async function onceForKey<Body>(store: Store, logger: Logger, request: IdempotentRequest | undefined, work: (claim?: IdempotencyClaim) => Promise<Answer<Body>>): Promise<Answer<Body>> {
  if (!request) return work();
  const fingerprint = createHash('sha256').update(canonicalJson(request.payload)).update(`\n${request.mode ?? 'strict'}`).digest('hex');
  const result = await store.idempotency.claim({ owner: request.owner, scope: request.scope, key: request.key }, fingerprint, new Date(), LIFETIME_MS, ABANDONED_MS);
  if ('held' in result) {
    const { held } = result;
    if (held.fingerprint !== fingerprint) {
      throw new ApiError(409, 'invalid_idempotent_request', 'Same idempotency key used with a different request payload. Change your idempotency key or payload.');
    }
    if (held.state === 'in_flight') throw concurrentRequest();
    return { status: held.response_status!, body: JSON.parse(held.response_body!) };
  }
  const claim: IdempotencyClaim = { ...result.claim, completed: false };
  try {
    return await work(claim);
  } finally {
    store.idempotency.settled(claim);
    if (!claim.completed) {
      await store.idempotency.release(claim).catch((err) => logger[failureLevel(err)]({ err, key: claim.key }, 'releasing an idempotency key failed'));
    }
  }
}

/** The Idempotency-Key header of the operations that declare it, refused when it cannot be a key: given twice, or of the wrong length. */
export function badIdempotencyKeys(spec: OpenApiDocument, compile: (pointer: string) => ValidateFunction): (req: Request) => ApiError | undefined {
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
  return keyRefusal;
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
