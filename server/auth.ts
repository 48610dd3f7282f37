// Bearer authentication and per-key rate limiting. Which role an operation needs is read from its
// `security` in openapi.yaml; a full_access key holds every role, a sending_access key only its own.
import { timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import { hashKey, type Permission } from './apiKeys.ts';
import type { OpenApiDocument } from './contract.ts';
import { ApiError } from './errors.ts';
import type { ApiKeyRecord } from './store/apiKeys.ts';
import type { Store } from './store/index.ts';

const ROLES: Record<Permission, readonly string[]> = {
  full_access: ['full_access', 'sending_access'],
  sending_access: ['sending_access'],
};

type SecurityRequirement = Record<string, string[]>;
type ValidatedRequest = Request & { openapi?: { schema?: { security?: SecurityRequirement[] } } };

export function authenticate(spec: OpenApiDocument, store: Store): RequestHandler {
  const defaultSecurity = (spec.security ?? []) as SecurityRequirement[];
  return async (req, res, next) => {
    const security = (req as ValidatedRequest).openapi?.schema?.security ?? defaultSecurity;
    if (security.length === 0) return next();

    const key = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '')?.[1];
    if (!key) {
      throw new ApiError(401, 'missing_api_key', 'Missing API key in the authorization header. Use `Authorization: Bearer re_...`.');
    }
    const hash = hashKey(key);
    const record = await store.apiKeys.findByHash(hash.toString('hex'));
    if (!record || record.revoked_at !== null || !timingSafeEqual(Buffer.from(record.key_hash, 'hex'), hash)) {
      throw new ApiError(403, 'invalid_api_key', 'API key is invalid.');
    }
    const held = ROLES[record.permission];
    if (!security.some((requirement) => (requirement.bearerAuth ?? []).every((role) => held.includes(role)))) {
      throw new ApiError(401, 'restricted_api_key', 'This API key is restricted to only send emails.');
    }
    res.locals.apiKey = record satisfies ApiKeyRecord;
    next();
  };
}

/** A fixed one-second window per key, in this process. */
export function rateLimit(perSecond: number): RequestHandler {
  let window = 0;
  let counts = new Map<string, number>();
  return (_req, res, next) => {
    const key = (res.locals.apiKey as ApiKeyRecord | undefined)?.id;
    if (!key) return next();
    const now = Date.now();
    if (Math.floor(now / 1000) !== window) {
      window = Math.floor(now / 1000);
      counts = new Map();
    }
    const count = (counts.get(key) ?? 0) + 1;
    counts.set(key, count);
    if (count > perSecond) {
      // The window is one second long, so the next one always starts within a second.
      throw new ApiError(429, 'rate_limit_exceeded', `Too many requests. You can only make ${perSecond} requests per second.`, { 'Retry-After': '1' });
    }
    next();
  };
}
