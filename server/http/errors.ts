// Every error leaves as {statusCode, message, name}. Validator and body-parser errors are mapped here,
// with messages that name the field at fault, worded from the schema that rejected it.
import type { ErrorObject } from 'ajv/dist/2020.js';
import type { ErrorRequestHandler, Request, Response } from 'express';
import type { Logger } from 'pino';
import type { ErrorName } from '../api.ts';
import { resolveRef, type OpenApiDocument } from '../contract.ts';
import { withHead } from './head.ts';
import { failureLevel, isStorageFull, isUnavailable, noConnectionInTime } from '../store/database.ts';
import { StoreFileGone } from '../store/sqlite.ts';
import { CommitUnconfirmed } from '../store/confirmedCommit.ts';
import { AddressTaken, InUseByBroadcast, NotFound, UnknownReference } from '../store/missing.ts';
import { quoted } from '../quoted.ts';
import { SendRefused } from '../domains/senders.ts';

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
  errors?: { path: string; message: string; errorCode?: string }[];
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
  if (!fromResponse && e.status === 500 && req.is('multipart/form-data')) return invalid('The body is not a well-formed multipart/form-data form.');
  switch (!fromResponse && e.status) {
    case 400:
      return requestValidationError(e, req, spec);
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

/** The first failure, said the way a person fixing the request needs it: which field, and what it must be. */
function requestValidationError(e: ValidatorError, req: Request, spec: OpenApiDocument): ApiError {
  const item = e.errors?.find(matchedNoBranch) ?? e.errors?.find((error, _, all) => !wrongBranch(error, all));
  if (!item) return invalid(e.message);
  // The validator's routing, which could not decode the path's parameters (its own wording).
  if (item.message.startsWith('malformed uri')) return invalid('The path is not percent-encoded correctly (a % must be followed by two hexadecimal digits, encoding UTF-8).', 'invalid_parameter');
  // The validator's multipart reader (multer), about the form as a whole: its path is the request's.
  if (item.path === req.path) {
    if (item.message.startsWith('multipart file(s) required')) return invalid('The body is not a well-formed multipart/form-data form.');
    return invalid(`The form is refused: ${lowerFirst(item.message)}.`);
  }
  const [, location, ...rest] = item.path.split('/');
  const field = rest.join('.') || 'body'; // an error about the body as a whole has no path below it
  const keyword = item.errorCode?.split('.')[0];
  const name: ErrorName = location === 'params' ? 'invalid_parameter' : 'validation_error';
  if (item.message.startsWith('Unknown query parameter')) return invalid(`Unknown query parameter ${quoted(field)}.`);
  if (item.message.startsWith('Empty value found')) return invalid(`The \`${field}\` must not be empty: give it a value, or leave it out.`, name);
  // The query parser turns a repeated parameter, or one named as a list (`x[]=`), into a list, which a parameter that is no list refuses by its type.
  if (location === 'query' && keyword === 'type' && Array.isArray(req.query[field])) {
    if (timesGiven(req, field) > 1) return invalid(`The \`${field}\` is given more than once; give it once.`, name);
    return invalid(`The \`${field}\` takes one value, not a list: give it as \`${field}=…\`.`, name);
  }
  if (item.message.includes('must be url encoded')) return invalid(`The \`${field}\` must be percent-encoded: its value holds a character with a meaning in URLs (one of :/?#[]@!$&'()*+,;=).`, name);
  if (keyword === 'required') {
    const [parent, own] = splitField(field);
    const choice = location === 'body' ? fieldChoice(bodySchema(req, spec, parent)) : undefined;
    if (choice?.includes(own)) return invalid(`Missing ${choice.map((one) => `\`${joinField(parent, one)}\``).join(' or ')} field.`, 'missing_required_field');
    const when = location === 'body' ? dependency(req, spec, field, (rule) => rule.required?.includes(field)) : undefined;
    return invalid(when ? `Missing \`${field}\` field; it is required with \`${when}\`.` : `Missing \`${field}\` field.`, 'missing_required_field');
  }
  if (keyword === 'additionalProperties') return invalid(`The field ${quoted(field)} is not supported.`);
  if (keyword === 'false schema') {
    const when = location === 'body' ? dependency(req, spec, field, (rule) => rule.properties?.[field] === false) : undefined;
    if (when) return invalid(`The field \`${field}\` cannot be combined with \`${when}\`.`);
  }
  if ((keyword === 'minProperties' || keyword === 'maxProperties') && location === 'body' && field === 'body') {
    // A body that takes exactly one of its fields (minProperties and maxProperties 1), such as removing suppressions by `emails` or by `ids`.
    const choice = bodySchema(req, spec);
    if (choice?.minProperties === 1 && choice?.maxProperties === 1) {
      const names = Object.keys(choice.properties ?? {}).map((name) => `\`${name}\``).join(' or ');
      return keyword === 'minProperties' ? invalid(`Missing ${names} field.`, 'missing_required_field') : invalid(`Give ${names}, not both.`);
    }
    if (keyword === 'minProperties' && choice?.minProperties === 1) return invalid('The body is empty: give at least one field to change.', 'missing_required_field');
  }
  const schema = location === 'query' || location === 'params' || location === 'headers' ? parameterSchema(req, spec, field) : undefined;
  switch (keyword) {
    case 'minimum':
    case 'maximum':
      if (schema?.minimum !== undefined && schema?.maximum !== undefined) {
        return invalid(`The \`${field}\` must be between ${schema.minimum} and ${schema.maximum}.`, name);
      }
      break;
    case 'format': {
      const format = item.message.match(/format "([^"]+)"/)?.[1];
      const what = format === 'uuid' ? 'a valid UUID' : format === 'email' ? 'a valid email address' : `a valid ${format}`;
      return invalid(`The \`${field}\` must be ${what}.`, name);
    }
    case 'type': {
      const types = item.message.replace(/^must be /, '').split(',');
      return invalid(`The \`${field}\` must be ${types.map((type) => TYPE_NAMES[type] ?? type).join(' or ')}.`, name);
    }
    case 'const': {
      const when = location === 'body' ? dependency(req, spec, field, (rule) => rule.properties?.[field]?.const !== undefined) : undefined;
      const value = when && bodySchema(req, spec).dependentSchemas[when].properties[field].const;
      if (when) return invalid(`The \`${field}\` must be \`${JSON.stringify(value)}\` with \`${when}\`.`, name);
      const own = (schema ?? (location === 'body' ? bodySchema(req, spec, field) : undefined))?.const;
      if (own !== undefined) return invalid(`The \`${field}\` must be \`${own}\`.`, name);
      break;
    }
    case 'enum': {
      const allowed: unknown[] | undefined = (schema ?? (location === 'body' ? bodySchema(req, spec, field) : undefined))?.enum;
      if (allowed) return invalid(`The \`${field}\` must be one of ${allowed.map((value) => `\`${value}\``).join(', ')}.`, name);
      break;
    }
    case 'anyOf':
    case 'oneOf': {
      const described = schema ?? (location === 'body' ? bodySchema(req, spec, field) : undefined);
      // Not an object at all: both branches pass (`required` holds for anything else), and its type error says what is wrong.
      const choice = fieldChoice(described);
      // `required` holds for anything but an object: a value of another type passes both branches.
      if (choice && !isObject(valueAt(req.body, field))) return invalid(`The \`${field}\` must be an object.`, name);
      if (choice) return invalid(`Give ${choice.map((one) => `\`${joinField(field, one)}\``).join(' or ')}, not both.`, name);
      if (described?.description) return invalid(`The \`${field}\` must be ${lowerFirst(described.description)}`, name);
      break;
    }
    case 'pattern': {
      const meaning = patternMeanings(spec).get(item.message.match(/^must match pattern "(.*)"$/s)?.[1] ?? '');
      if (meaning) return invalid(`The \`${field}\` must be ${meaning}.`, name);
      break;
    }
  }
  return invalid(`The \`${field}\` ${inWords(item.message)}.`, name);
}

/**
 * A union (oneOf, anyOf) whose value no branch took: every branch refused the whole value by its type
 * (`to: null`) or its enum (an unknown webhook event), or, for a parameter (an id or an address), by
 * its type, format or pattern; nothing failed below it. The union's own words then say what the value
 * may be, where the first branch's reason would say only what it alone takes. (In a body, one branch
 * refusing by pattern is the branch the caller meant, whose words say more: wrongBranch.)
 */
function matchedNoBranch(error: NonNullable<ValidatorError['errors']>[number], _: number, all: NonNullable<ValidatorError['errors']>): boolean {
  if (!/^(oneOf|anyOf)\./.test(error.errorCode ?? '')) return false;
  const refusal = /^\/(params|query)\//.test(error.path) ? /^(type|format|pattern)\./ : /^(type|enum)\./;
  return all.every((other) => other === error || (other.path === error.path ? refusal.test(other.errorCode ?? '') : !other.path.startsWith(`${error.path}/`)));
}

/**
 * A union (oneOf, anyOf) fails with every branch's reasons. When one branch took the value and failed
 * on something other than its type (below the union's path, or at it: 51 addresses in `to`), that
 * branch is what the caller meant: another branch's "must be <type>" at the union's own path would
 * only mislead (`{"id": "x"}` is not "a string").
 */
function wrongBranch(error: NonNullable<ValidatorError['errors']>[number], all: NonNullable<ValidatorError['errors']>): boolean {
  if (!error.errorCode?.startsWith('type.')) return false;
  const atUnion = all.some((other) => /^(oneOf|anyOf)\./.test(other.errorCode ?? '') && other.path === error.path);
  const tookIt = (other: (typeof all)[number]) => other.path === error.path ? !/^(type|oneOf|anyOf)\./.test(other.errorCode ?? '') : other.path.startsWith(`${error.path}/`);
  return atUnion && all.some(tookIt);
}

/**
 * The same wording for errors from a schema compiled by server/contract.ts (which keeps the failing
 * schema with each error), such as those of the emails of a batch.
 */
export function describeSchemaErrors(errors: ErrorObject[]): string {
  const field = (path: string, property?: string) => [...path.split('/').slice(1), ...(property ? [property] : [])].join('.');
  const excluded = errors.find((e) => e.keyword === 'false schema');
  const other = excluded && /dependentSchemas\/([^/]+)/.exec(excluded.schemaPath)?.[1];
  // A field the schema names only to refuse it, as a batch's email refuses `scheduled_at` and
  // `attachments` (a single send takes them): that is what is wrong, whatever the field holds.
  if (excluded && !other) return `The field ${quoted(field(excluded.instancePath))} is not supported in a batch; send that email on its own.`;
  const required = errors.find((e) => e.keyword === 'required');
  if (required) return `Missing \`${field(required.instancePath, required.params.missingProperty)}\` field.`;
  const extra = errors.find((e) => e.keyword === 'additionalProperties');
  if (extra) return `The field ${quoted(field(extra.instancePath, extra.params.additionalProperty))} is not supported.`;
  if (excluded) return `The field \`${field(excluded.instancePath)}\` cannot be combined with \`${other}\`.`;
  const union = errors.find((e) => e.keyword === 'oneOf' || e.keyword === 'anyOf');
  if (union?.parentSchema?.description) return `The \`${field(union.instancePath)}\` must be ${lowerFirst(union.parentSchema.description)}`;
  const first = errors[0]!;
  const type = first.keyword === 'type' ? TYPE_NAMES[String(first.params.type)] : undefined;
  const meaning: unknown = first.keyword === 'pattern' ? first.parentSchema?.[PATTERN_MEANING] : undefined;
  const must = type ?? (typeof meaning === 'string' ? meaning : undefined);
  return `The \`${field(first.instancePath) || 'email'}\` ${must ? `must be ${must}` : inWords(first.message ?? 'is not valid')}.`;
}

/** The media types the operation's request body may have, as a message names them. */
function acceptedTypes(req: Request): string {
  const body = req.openapi?.schema?.requestBody;
  const content = body && 'content' in body ? body.content : undefined;
  const types = content ? Object.keys(content) : ['application/json'];
  return types.map((type) => `\`${type}\``).join(' or ');
}

/** The path item of the request's route in the contract. */
function pathItem(req: Request, spec: OpenApiDocument): any {
  const route = req.openapi?.openApiRoute;
  return route ? (spec.paths[route.replace(/:(\w+)/g, '{$1}')] as any) : undefined;
}

/** The schema the contract gives the request's body, or a field of it (`topics.0.id`), through properties, items and references. */
function bodySchema(req: Request, spec: OpenApiDocument, field = ''): any {
  const content = resolveRef(spec, pathItem(req, spec)?.[req.method.toLowerCase()]?.requestBody)?.content ?? {};
  let schema = resolveRef(spec, (Object.values(content)[0] as { schema?: unknown } | undefined)?.schema);
  for (const step of field ? field.split('.') : []) {
    // A key the object does not name (a contact property's) is described by its additionalProperties.
    const named = schema?.properties?.[step] ?? (typeof schema?.additionalProperties === 'object' ? schema.additionalProperties : undefined);
    schema = resolveRef(spec, /^\d+$/.test(step) ? schema?.items : named);
  }
  return schema;
}

/**
 * The fields an object must have exactly one of, when its schema says so with a `oneOf` of `required`
 * alone (an attachment's `content` or `path`); otherwise undefined.
 */
function fieldChoice(schema: any): string[] | undefined {
  const branches: unknown = schema?.oneOf;
  const alone = (branch: any) => Object.keys(branch).length === 1 && Array.isArray(branch.required) && branch.required.length === 1;
  return Array.isArray(branches) && branches.every(alone) ? branches.map((branch) => branch.required[0] as string) : undefined;
}

const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);
const valueAt = (body: unknown, field: string): unknown => field.split('.').reduce<any>((at, step) => at?.[step], body);

/** `attachments.0.content` as its object's field and its own name: [`attachments.0`, `content`]. */
const splitField = (field: string): [string, string] => {
  const at = field.lastIndexOf('.');
  return at < 0 ? ['', field] : [field.slice(0, at), field.slice(at + 1)];
};
const joinField = (parent: string, name: string) => (parent ? `${parent}.${name}` : name);

/** The field whose presence brings in the rule (a `dependentSchemas` entry of the body) that `field` broke. */
function dependency(req: Request, spec: OpenApiDocument, field: string, broke: (rule: any) => boolean): string | undefined {
  const rules: Record<string, any> = bodySchema(req, spec)?.dependentSchemas ?? {};
  return Object.entries(rules).find(([when, rule]) => when in (req.body ?? {}) && broke(rule))?.[0];
}

function parameterSchema(req: Request, spec: OpenApiDocument, name: string): any {
  const item = pathItem(req, spec);
  const parameters = [...(item?.parameters ?? []), ...(item?.[req.method.toLowerCase()]?.parameters ?? [])].map((p) => resolveRef(spec, p));
  const parameter = parameters.find((p) => p.name.toLowerCase() === name.toLowerCase());
  return parameter ? { ...resolveRef(spec, parameter.schema), description: parameter.description } : undefined;
}

/** The contract gives a pattern's meaning in words beside it, for refusals: "The `subject` must be <meaning>." */
const PATTERN_MEANING = 'x-pattern-meaning';
const meaningsBySpec = new WeakMap<OpenApiDocument, Map<string, string>>();

/** Every pattern in the contract that has its meaning beside it, by pattern. */
function patternMeanings(spec: OpenApiDocument): Map<string, string> {
  let meanings = meaningsBySpec.get(spec);
  if (meanings) return meanings;
  meanings = new Map();
  const walk = (node: unknown): void => {
    if (typeof node !== 'object' || node === null) return;
    const schema = node as Record<string, unknown>;
    if (typeof schema.pattern === 'string' && typeof schema[PATTERN_MEANING] === 'string') meanings!.set(schema.pattern, schema[PATTERN_MEANING]);
    for (const value of Object.values(schema)) walk(value);
  };
  walk(spec);
  meaningsBySpec.set(spec, meanings);
  return meanings;
}

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
};

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

/**
 * Ajv's words for a bound on length or count, as a person would say them: "must NOT have fewer than 1
 * characters" is "must not be empty", "must NOT have more than 50 items" is "must have at most 50 items".
 */
function inWords(message: string): string {
  const bound = /^must NOT have (fewer|more) than (\d+) (characters|items|properties)$/.exec(message);
  if (!bound) return message;
  const [, side, limit, unit] = bound as unknown as [string, 'fewer' | 'more', string, string];
  const things = unit === 'properties' ? 'fields' : unit;
  if (side === 'fewer' && limit === '1') return unit === 'characters' ? 'must not be empty' : `must have at least one ${things.slice(0, -1)}`;
  const count = Number(limit).toLocaleString('en');
  if (unit === 'characters') return `must be ${side === 'fewer' ? 'at least' : 'at most'} ${count} characters long`;
  return `must have ${side === 'fewer' ? 'at least' : 'at most'} ${count} ${things}`;
}

/** How many times the request's query string names the parameter, as itself or as a list (`field[]`, `field[0]`). */
function timesGiven(req: Request, field: string): number {
  const query = req.originalUrl.split('?')[1] ?? '';
  return [...new URLSearchParams(query).keys()].filter((key) => key === field || key.startsWith(`${field}[`)).length;
}
