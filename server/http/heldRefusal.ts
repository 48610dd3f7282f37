// The request check judges a request before auth has seen its key, but its verdict is said after
// auth: a request without a valid key is answered 401, 403 or 429 whatever its body, and one with a
// key gets its rate-limit headers with the refusal. What routing refuses (404, 405: no operation was
// found) is said at once.
import type { ErrorRequestHandler, RequestHandler } from 'express';

export const holdRefusal: ErrorRequestHandler = (err, req, res, next) => {
  if (!req.openapi) return next(err);
  res.locals.refusal = err;
  next();
};

/** The held refusal, the batch triage's first: it names the email by its index. */
export const sayHeldRefusal: RequestHandler = (_req, res, next) => next(res.locals.batch?.refusal ?? res.locals.refusal);
