// What the middlewares hand on to later ones, in `res.locals` and in the validator's `req.openapi`,
// declared once so that every read is typed. A global declaration: tsconfig includes server/, so no
// file needs to import this one.
import type { OpenApiRequestMetadata } from 'express-openapi-validator/dist/framework/types.js';
import type { TriagedBatch } from '../emails/batch.ts';
import type { IdempotencyClaim } from '../emails/idempotency.ts';
import type { ApiKeyRecord } from '../store/apiKeys.ts';

declare global {
  namespace Express {
    interface Request {
      /** The operation the validator's routing matched, with its path parameters decoded; absent for a path the contract lacks. */
      openapi?: OpenApiRequestMetadata;
    }
    interface Locals {
      /** The request's x-request-id, repeated in every log line about it. */
      reqId: string;
      /** Why the body parser refused the body, held until auth has judged the request (server/jsonBody.ts). */
      bodyRefusal?: unknown;
      /** The authenticated key, from authenticate() on. */
      apiKey?: ApiKeyRecord;
      /** The Idempotency-Key claim this request holds, if it sent one. */
      idempotency?: IdempotencyClaim;
      /** A send batch after triage: the emails to store and, in permissive mode, the ones set aside. */
      batch?: TriagedBatch;
    }
  }
}
