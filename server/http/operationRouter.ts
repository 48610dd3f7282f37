// Routing by operation. The validator's routing has matched each request to one operation of the
// contract already (req.openapi), and decoded its path parameters: its handler is looked up by
// operationId, rather than matched again against a path pattern by an Express router per resource.
// Every operation the contract lists has a handler, or the server does not start.
import type { RequestHandler } from 'express';
import type { OperationHandler, OperationId } from '../api.ts';
import { operationsOf, resolveRef, type OpenApiDocument } from '../contract.ts';
import { ApiError } from './errors.ts';
import { UUID_FORM } from '../store/timeOrderedId.ts';

/** A resource's handlers, by the operationId each answers (those that answer other than JSON, such as a page, as plain handlers). */
export type Handlers = { [Op in OperationId]?: OperationHandler<Op> | RequestHandler<any> };

/**
 * Paths of Resend operations Mailroom does not have (the SDK's contacts.imports, emails.metrics,
 * emails.receiving lists and domains.claims.create) that a path of the contract would take for an id: `/contacts/imports` as the
 * contact `imports`, refused 422 as no id or email, or 405 for a POST. They are answered 404, as every
 * other route the contract lacks.
 */
const NOT_SERVED = new Set(['/contacts/imports', '/emails/metrics', '/emails/receiving', '/domains/claim']);

/**
 * A path is what the contract writes, letter for letter (RFC 3986): `/emails/` is not `/emails`, whose
 * list would answer an SDK asking for the email with the id "", and `/emails//batch` is no path of it.
 */
export const exactPaths: RequestHandler = (req, _res, next) =>
  next(req.path !== '/' && (req.path.endsWith('/') || req.path.includes('//')) ? new ApiError(404, 'not_found', `No route for ${req.method} ${req.path}.`) : undefined);

export const notServed: RequestHandler = (req, _res, next) => next(NOT_SERVED.has(req.path) ? new ApiError(404, 'not_found', `No route for ${req.method} ${req.path}.`) : undefined);

export function operationRouter(spec: OpenApiDocument, handlers: Handlers): RequestHandler {
  const unanswered = operationsOf(spec).map(({ operation }) => operation.operationId as string).filter((id) => !(id in handlers));
  if (unanswered.length) throw new Error(`no handler for ${unanswered.join(', ')}`);
  const byId: Record<string, RequestHandler> = handlers as Record<string, RequestHandler>;
  const idPlaces = new Map(operationsOf(spec).map(({ operation }) => [operation.operationId as string, uuidPlaces(spec, operation.requestBody?.content?.['application/json']?.schema)]));
  return (req, res, next) => {
    const { schema, pathParams } = req.openapi ?? {};
    const handler = schema?.operationId === undefined ? undefined : byId[schema.operationId];
    if (!handler) return next();
    // Express gives each middleware the parameters of its own mount path ({} here): the operation's are the validator's.
    req.params = asStored(pathParams ?? {});
    asStored(req.query);
    for (const place of idPlaces.get(schema!.operationId!) ?? []) lowerAt(req.body, place);
    return handler(req, res, next);
  };
}

/**
 * Where a request body holds a Uuid (`format: uuid`), as property paths, `*` for every item of an
 * array: `segments.*`, `topics.*.id`, `segment_id`. Found once, from the contract.
 */
function uuidPlaces(spec: OpenApiDocument, node: unknown, path: string[] = [], refs: string[] = []): string[][] {
  const ref = (node as { $ref?: string } | undefined)?.$ref;
  if (ref && refs.includes(ref)) return []; // a schema within itself
  const schema = resolveRef<Record<string, any> | undefined>(spec, node);
  if (!schema || typeof schema !== 'object') return [];
  const within = ref ? [...refs, ref] : refs;
  if (schema.format === 'uuid') return [path];
  const places = [...(schema.oneOf ?? []), ...(schema.anyOf ?? []), ...(schema.allOf ?? [])].flatMap((branch: unknown) => uuidPlaces(spec, branch, path, within));
  for (const [name, property] of Object.entries(schema.properties ?? {})) places.push(...uuidPlaces(spec, property, [...path, name], within));
  if (schema.items) places.push(...uuidPlaces(spec, schema.items, [...path, '*'], within));
  return places;
}

/** Lower-cases the UUID-form string at `place` in `value` (see asStored), wherever it is present. */
function lowerAt(value: unknown, place: string[]): void {
  if (typeof value !== 'object' || value === null) return;
  const [step, ...rest] = place;
  const at = value as Record<string, unknown>;
  const keys = step === '*' ? (Array.isArray(value) ? [...value.keys()].map(String) : []) : step !== undefined && Object.hasOwn(at, step) ? [step] : [];
  for (const key of keys) {
    const found = at[key];
    if (rest.length > 0) lowerAt(found, rest);
    else if (typeof found === 'string' && found !== found.toLowerCase() && UUID_FORM.test(found)) at[key] = found.toLowerCase();
  }
}

/**
 * Ids are made and stored in lower case, and a UUID is the same in any case (RFC 9562): one given in
 * upper case, in the path, as a cursor or in a body, names what it names in lower case. Changes
 * `values` in place.
 */
function asStored<T extends Record<string, unknown>>(values: T): T {
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string' && value !== value.toLowerCase() && UUID_FORM.test(value)) (values as Record<string, unknown>)[name] = value.toLowerCase();
  }
  return values;
}
