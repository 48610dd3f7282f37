// Bearer authentication and authorization. Which role an operation needs is read from its
// `security` in openapi.yaml; a full_access key holds every role, a sending_access key only its own.
import type { Request, RequestHandler } from 'express';
import type { Permission } from '../apiKeys/key.ts';
import type { OpenApiDocument } from '../contract.ts';
import { ApiError } from './errors.ts';
import { givenMoreThanOnce } from './repeatedHeader.ts';
import type { Logger } from 'pino';
import { failureLevel } from '../store/database.ts';
import type { Store } from '../store/index.ts';
import { authFailureLimit } from './rateLimit.ts';

const ROLES: Record<Permission, readonly string[]> = {
  full_access: ['full_access', 'sending_access'],
  sending_access: ['sending_access'],
};

type SecurityRequirement = Record<string, string[]>;

const securityOf = (spec: OpenApiDocument, req: Request): SecurityRequirement[] => req.openapi?.schema?.security ?? ((spec.security ?? []) as SecurityRequirement[]);

/**
 * Finds the API key of an operation that needs one: 401 without one, 403 for one unknown or revoked;
 * past `failuresPerMinute` such failures from one client address, 429 (0: never).
 */
export function authenticate(spec: OpenApiDocument, store: Store, logger: Logger, failuresPerMinute = 0): RequestHandler {
  const limit = failuresPerMinute > 0 ? authFailureLimit(failuresPerMinute, store, logger) : undefined;
  return async (req, res, next) => {
    if (securityOf(spec, req).length === 0) return next();
    // Answered as it is, or with 429 once its address has failed too often.
    const refusal = async (failure: ApiError) => (limit ? limit(req.socket.remoteAddress, failure) : failure);
    // Node keeps the first of two; a proxy in front may read the last: who is asking must be plain.
    if (givenMoreThanOnce(req.rawHeaders, 'authorization')) throw await refusal(new ApiError(403, 'invalid_api_key', 'The Authorization header is given more than once: give the API key once.'));
    const key = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '')?.[1];
    if (!key) {
      throw await refusal(new ApiError(401, 'missing_api_key', 'Missing API key in the authorization header. Use `Authorization: Bearer re_...`.'));
    }
    const record = await store.apiKeys.findByToken(key);
    if (!record || record.revoked_at !== null) {
      throw await refusal(new ApiError(403, 'invalid_api_key', 'API key is invalid.'));
    }
    res.locals.apiKey = record;
    // Last use is kept to the minute, so a key is written at most about once a minute, not per request;
    // in the minute the key was made, as its creation, so that it is never used before it was made.
    const minute = `${new Date().toISOString().slice(0, 16)}:00.000Z`;
    const usedAt = minute < record.created_at ? record.created_at : minute;
    if (record.last_used_at === null || record.last_used_at < usedAt) {
      // Bookkeeping: a database that cannot take this write (its disk full) may still answer the request.
      await store.apiKeys.touch(record.id, usedAt).catch((err: unknown) => logger[failureLevel(err)]({ err, reqId: res.locals.reqId }, 'the API key\'s last use could not be recorded'));
    }
    next();
  };
}

/**
 * Lets the key call the operation if it holds a role the operation accepts. Apart from authenticate so
 * that the rate limit, mounted between them, counts a key's refused calls too.
 */
export function authorize(spec: OpenApiDocument): RequestHandler {
  return (req, res, next) => {
    const security = securityOf(spec, req);
    const record = res.locals.apiKey;
    if (security.length === 0 || !record) return next();
    const held = ROLES[record.permission];
    if (!security.some((requirement) => (requirement.bearerAuth ?? []).every((role) => held.includes(role)))) {
      throw new ApiError(401, 'restricted_api_key', 'This API key is restricted to only send emails.');
    }
    next();
  };
}

