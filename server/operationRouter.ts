// Routing by operation. The validator's routing has matched each request to one operation of the
// contract already (req.openapi), and decoded its path parameters: its handler is looked up by
// operationId, rather than matched again against a path pattern by an Express router per resource.
// Every operation the contract lists has a handler, or the server does not start.
import type { RequestHandler } from 'express';
import type { OperationHandler, OperationId } from './api.ts';
import type { OpenApiDocument } from './contract.ts';

/** A resource's handlers, by the operationId each answers (those that answer other than JSON, such as a page, as plain handlers). */
export type Handlers = { [Op in OperationId]?: OperationHandler<Op> | RequestHandler<any> };

type Routed = { openapi?: { schema?: { operationId?: string }; pathParams?: Record<string, string> } };

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

export function operationRouter(spec: OpenApiDocument, handlers: Handlers): RequestHandler {
  const unanswered = operationIds(spec).filter((id) => !(id in handlers));
  if (unanswered.length) throw new Error(`no handler for ${unanswered.join(', ')}`);
  const byId: Record<string, RequestHandler> = handlers as Record<string, RequestHandler>;
  return (req, res, next) => {
    const { schema, pathParams } = (req as Routed).openapi ?? {};
    const handler = schema?.operationId === undefined ? undefined : byId[schema.operationId];
    if (!handler) return next();
    // Express gives each middleware the parameters of its own mount path ({} here): the operation's are the validator's.
    req.params = pathParams ?? {};
    return handler(req, res, next);
  };
}

/** The operations under `paths` (the `webhooks` are posted by the server, not answered by it). */
function operationIds(spec: OpenApiDocument): string[] {
  const items = Object.values(spec.paths ?? {}) as Record<string, { operationId?: string }>[];
  return items.flatMap((item) => METHODS.flatMap((method) => item[method]?.operationId ?? []));
}
