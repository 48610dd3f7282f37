// Every error leaves as {statusCode, message, name}. Validator and body-parser errors are mapped here;
// the request check's refusals are worded in refusals.ts, from the schema that rejected the field.
import type { ErrorRequestHandler, Request, Response } from 'express';
import { error as validatorErrors } from 'express-openapi-validator';
import type { Logger } from 'pino';
import type { ErrorName } from '../api.ts';
import type { OpenApiDocument } from '../contract.ts';
import { withHead } from './head.ts';
import { failureLevel, isStorageFull, isUnavailable, noConnectionInTime } from '../store/database.ts';
import { StoreFileGone } from '../store/sqlite.ts';
import { CommitUnconfirmed } from '../store/confirmedCommit.ts';
import { AddressTaken, InUseByBroadcast, NotFound, UnknownReference } from '../store/missing.ts';
import { quoted } from '../quoted.ts';
import { SendRefused } from '../domains/senders.ts';
import { requestRefusal, type ValidatorErrorItem } from './refusals.ts';

export { describeSchemaErrors } from './refusals.ts';

export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly errorName: ErrorName,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const databaseUnavailable = (message = 'The database cannot be reached right now; try again shortly.') =>
  new ApiError(503, 'service_unavailable', message, { 'Retry-After': '1' });
/** Nothing was written: the operator must make room, so a retry is worth it in minutes, not at once. */
const storageFull = () => new ApiError(503, 'service_unavailable', 'The database has no room left to write; nothing was changed. Try again later.', { 'Retry-After': '60' });

export const notFound = (what: string) => new ApiError(404, 'not_found', `${what} not found`);
export const invalid = (message: string, name: ErrorName = 'validation_error') => new ApiError(422, name, message);

/**
 * The refusal of a single email that composeEmail worded: "Missing `x` field." is a
 * missing_required_field, as the request check names a field the schema requires. (A batch names
 * every refusal validation_error, with the email's index.)
 */
export const refusedEmail = (message: string) => invalid(message, message.startsWith('Missing `') ? 'missing_required_field' : 'validation_error');

export function sendError(res: Response, error: ApiError): void {
  res.set(error.headers).status(error.statusCode).json({ statusCode: error.statusCode, message: error.message, name: error.errorName });
}

/** What express-openapi-validator throws. */
interface ValidatorError {
  status: number;
  message: string;
  headers?: { Allow?: string };
  errors?: ValidatorErrorItem[];
}

export function errorHandler(spec: OpenApiDocument, logger: Logger): ErrorRequestHandler[] {
  const handle: ErrorRequestHandler = (err, req, res, _next) => {
    const mapped = toApiError(err, req, spec);
    // The database out of reach is the operator's to mend, not a fault of the server's: a warning.
    if (mapped.statusCode >= 500 && failureLevel(err) === 'warn') logger.warn({ reqId: res.locals.reqId, err }, 'request failed: the database could not be reached');
    else if (mapped.statusCode >= 500) logger.error({ reqId: res.locals.reqId, err, validation: (err as ValidatorError).errors }, 'request failed');
    if (res.headersSent) {
      // A streamed body broke off midway; all that can be done is to cut the connection.
      res.destroy();
      return;
    }
    sendError(res, mapped);
  };
  // An error response that itself breaks the contract does not fail here: the validator's response check
  // hands its failure to the `next` it was given early in the request, which leads past this handler,
  // and past the last one to Express's own HTML page with a stack trace. So the same handler stands
  // again behind itself and makes it a logged 500 (res.json is no longer checked by then).
  return [handle, handle];
}

function isBareJson(body: unknown): boolean {
  if (typeof body !== 'string') return false;
  try {
    const value: unknown = JSON.parse(body);
    return value === null || typeof value !== 'object';
  } catch {
    return false;
  }
}

function toApiError(err: unknown, req: Request, spec: OpenApiDocument): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof NotFound) return notFound(err.what);
  if (err instanceof SendRefused) return new ApiError(403, 'validation_error', err.message);
  if (err instanceof InUseByBroadcast) {
    if (err.status === 'going out') return invalid(`The ${err.what} cannot be deleted yet: emails of broadcast ${quoted(err.broadcastId)}, which is addressed to it, are still going out. Try again once they have.`);
    return invalid(`The ${err.what} cannot be deleted: broadcast ${quoted(err.broadcastId)}, which is ${err.status}, is addressed to it. Cancel that broadcast, or give it another ${err.what}, first.`);
  }
  if (err instanceof AddressTaken) return invalid(`Another contact has the address ${quoted(err.email)}.`);
  if (err instanceof UnknownReference) return invalid(`The ${err.field === 'segments' ? 'segment' : 'topic'} ${quoted(err.id)} in \`${err.field}\` does not exist.`);
  if (isStorageFull(err)) return storageFull();
  if (err instanceof StoreFileGone) return new ApiError(503, 'service_unavailable', 'The database file was deleted or replaced while the server ran; nothing was changed. Try again once the operator has restored it or restarted the server.', { 'Retry-After': '60' });
  if (err instanceof CommitUnconfirmed) {
    return new ApiError(
      503,
      'service_unavailable',
      `The connection to the database was lost as the email was being committed, and the database could not be asked since: it may have been accepted, as ${quoted(err.id)}. Look for it with GET /emails/{id}, or send again only with the same Idempotency-Key.`,
      { 'Retry-After': '1' },
    );
  }
  if (isUnavailable(err)) return databaseUnavailable(noConnectionInTime(err) ? 'No database connection came free in time: the database is busy or out of reach. Try again shortly.' : undefined);
  const e = err as ValidatorError & { type?: string; expose?: boolean; limit?: number; charset?: string; encoding?: string };
  switch (e.type) {
    case 'entity.parse.failed':
      // The parser takes only an object or an array: `"x"` or `null` alone is JSON, but no body here.
      if (isBareJson((e as { body?: unknown }).body)) return new ApiError(400, 'invalid_json', 'The body must be a JSON object (or, for a batch, an array), not a bare string, number, boolean or null.');
      return new ApiError(400, 'invalid_json', 'The body is not valid JSON.');
    case 'entity.too.large':
      return new ApiError(413, 'payload_too_large', `The body is larger than ${e.limit} bytes.`);
    case 'encoding.unsupported': // a Content-Encoding other than gzip, deflate, br or identity
      return new ApiError(415, 'unsupported_media_type', `The body's Content-Encoding, ${quoted(e.encoding ?? '')}, is not supported: send it as is, or with gzip, deflate or br.`);
    case 'charset.unsupported':
      if (req.is('application/x-www-form-urlencoded')) return new ApiError(415, 'unsupported_media_type', `The form must be in UTF-8 or ISO-8859-1, not ${quoted(e.charset ?? '')}.`);
      return new ApiError(415, 'unsupported_media_type', `The body must be JSON in UTF-8 or UTF-16, not ${quoted(e.charset ?? '')}.`);
    case 'parameters.too.many': // the unsubscribe form's fields, past their bound (server/unsubscribe/routes.ts)
      return invalid('The form is refused: too many fields.');
  }
  // body-parser passes zlib's error on, as a 400, for a JSON body its Content-Encoding does not describe.
  const encoding = req.get('content-encoding');
  if (e.status === 400 && typeof (err as { errno?: unknown }).errno === 'number' && encoding && req.is('application/json')) {
    return new ApiError(400, 'invalid_json', `The body could not be decoded as its Content-Encoding, ${quoted(encoding)}, says: ${e.message}.`);
  }
  const fromResponse = e.errors?.some((item) => item.path.startsWith('/response'));
  // The validator's multipart reader (multer) reports a form it cannot parse as a 500 of its own.
  if (!fromResponse && err instanceof validatorErrors.InternalServerError && req.is('multipart/form-data')) return invalid('The body is not a well-formed multipart/form-data form.');
  switch (!fromResponse && e.status) {
    case 400: {
      const refusal = e.errors && requestRefusal(e.errors, req, spec);
      return refusal ? invalid(refusal.message, refusal.name) : invalid(e.message);
    }
    case 404:
      return new ApiError(404, 'not_found', `No route for ${req.method} ${req.path}.`);
    case 405: {
      const allow = withHead((e.headers?.Allow ?? '').split(/,\s*/).filter(Boolean).map((m) => m.toUpperCase())).join(', ');
      return new ApiError(405, 'method_not_allowed', `Method ${req.method} is not allowed on ${req.path}; use ${allow}.`, { Allow: allow });
    }
    case 413:
      return new ApiError(413, 'payload_too_large', 'The body is too large.');
    case 415:
      return new ApiError(415, 'unsupported_media_type', `The body must be sent as ${acceptedTypes(req)}.`);
  }
  return new ApiError(500, 'internal_server_error', 'An unexpected error occurred.');
}

/** The media types the operation's request body may have, as a message names them. */
function acceptedTypes(req: Request): string {
  const body = req.openapi?.schema?.requestBody;
  const content = body && 'content' in body ? body.content : undefined;
  const types = content ? Object.keys(content) : ['application/json'];
  return types.map((type) => `\`${type}\``).join(' or ');
}
