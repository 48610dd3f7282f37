// What the middlewares hand on to later ones, in `res.locals` and in the validator's `req.openapi`,
// declared once so that every read is typed. A global declaration: tsconfig includes server/, so no
// file needs to import this one.
import type { middleware } from 'express-openapi-validator';
import type { TriagedBatch } from '../emails/batch.ts';
import type { ApiKeyRecord } from '../store/apiKeys.ts';

/** What the validator's routing sets on a request, as the types of its public `middleware` give it. */
type OpenApiRequestMetadata = NonNullable<Parameters<ReturnType<typeof middleware>[number]>[0]['openapi']>;

declare global {
  namespace Express {
    interface Request {
      /** The operation the validator's routing matched, with its path parameters decoded; absent for a path the contract lacks. */
      openapi?: OpenApiRequestMetadata;
    }
    interface Locals {
      /** The request's x-request-id, repeated in every log line about it. */
      reqId: string;
      /** Why the body parser refused the body, held until the operation is known (server/http/jsonBody.ts). */
      bodyRefusal?: unknown;
      /** What the request check (or what goes first of it) refused, said once auth has judged the key. */
      refusal?: unknown;
      /** The authenticated key, from authenticate() on. */
      apiKey?: ApiKeyRecord;
      /** A send batch after triage: where its emails came from, and in permissive mode the ones set aside. */
      batch?: TriagedBatch;
    }
  }
}
