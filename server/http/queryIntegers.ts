// A query parameter the contract types as an integer must be written as one. The request check coerces
// query strings with Number(), which also reads `0x10`, `1e1`, `1.0` and ` 1`: each would pass as a
// number its sender may not have meant. Checked on the query as parsed, before the request check.
import type { RequestHandler } from 'express';
import { operationsOf, resolveRef, type OpenApiDocument } from '../contract.ts';
import { invalid } from './errors.ts';

const INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

export function refuseLooseIntegers(spec: OpenApiDocument): RequestHandler {
  // By operationId, the names of its integer query parameters.
  const integers = new Map(
    operationsOf(spec).map(({ operation }) => [
      operation.operationId as string,
      ((operation.parameters ?? []) as unknown[])
        .map((parameter) => resolveRef(spec, parameter))
        .filter((parameter) => parameter.in === 'query' && resolveRef(spec, parameter.schema)?.type === 'integer')
        .map((parameter) => parameter.name as string),
    ]),
  );
  return (req, _res, next) => {
    for (const name of integers.get(req.openapi?.schema?.operationId ?? '') ?? []) {
      // As the query parser read it, before the request check coerces it. A repeated (an array) or
      // empty parameter is the request check's to refuse, with its own words.
      const value = req.query[name];
      if (typeof value === 'string' && value !== '' && !INTEGER.test(value)) throw invalid(`The \`${name}\` must be an integer.`);
    }
    next();
  };
}
