// The request check judges a request before auth has seen its key, but its verdict is said after
// auth: a request without a valid key is answered 401, 403 or 429 whatever its body, and one with a
// key gets its rate-limit headers with the refusal. What routing refuses (404, 405: no operation was
// found) is said at once.
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';

/** A refusal of a request, or undefined for none. */
export type Refusal = (req: Request, res: Response) => unknown;

export const holdRefusal: ErrorRequestHandler = (err, req, res, next) => {
  if (!req.openapi) return next(err);
  res.locals.refusal = err;
  next();
};

/**
 * The refusal to say, once auth has judged the key: the batch triage's first (it names the email by
 * its index), then the first of `clearer` (refusals that say more than the request check's about the
 * same request: a body that is no JSON, an integer written loosely, an Idempotency-Key that cannot be
 * one), then the request check's. Checked with or without one from the request check.
 */
export function sayRefusal(clearer: Refusal[]): RequestHandler {
  return (req, res, next) => {
    const refusal = res.locals.batch?.refusal ?? clearer.map((refuse) => refuse(req, res)).find((found) => found !== undefined) ?? res.locals.refusal;
    next(refusal);
  };
}
