// Routing by operation. The validator's routing has matched each request to one operation of the
// contract already (req.openapi), and decoded its path parameters: its handler is looked up by
// operationId, rather than matched again against a path pattern by an Express router per resource.
// Every operation the contract lists has a handler, or the server does not start.
import type { RequestHandler } from 'express';
import type { OperationHandler, OperationId } from './api.ts';
import { operationsOf, type OpenApiDocument } from './contract.ts';
import { UUID_FORM } from './store/timeOrderedId.ts';

/** A resource's handlers, by the operationId each answers (those that answer other than JSON, such as a page, as plain handlers). */
export type Handlers = { [Op in OperationId]?: OperationHandler<Op> | RequestHandler<any> };

export function operationRouter(spec: OpenApiDocument, handlers: Handlers): RequestHandler {
  const unanswered = operationsOf(spec).map(({ operation }) => operation.operationId as string).filter((id) => !(id in handlers));
  if (unanswered.length) throw new Error(`no handler for ${unanswered.join(', ')}`);
  const byId: Record<string, RequestHandler> = handlers as Record<string, RequestHandler>;
  return (req, res, next) => {
    const { schema, pathParams } = req.openapi ?? {};
    const handler = schema?.operationId === undefined ? undefined : byId[schema.operationId];
    if (!handler) return next();
    // Express gives each middleware the parameters of its own mount path ({} here): the operation's are the validator's.
    req.params = asStored(pathParams ?? {});
    asStored(req.query);
    return handler(req, res, next);
  };
}

/**
 * Ids are made and stored in lower case, and a UUID is the same in any case (RFC 9562): one given in
 * upper case, in the path or as a cursor, names what it names in lower case. Changes `values` in place.
 */
function asStored<T extends Record<string, unknown>>(values: T): T {
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string' && value !== value.toLowerCase() && UUID_FORM.test(value)) (values as Record<string, unknown>)[name] = value.toLowerCase();
  }
  return values;
}
