// A query parameter the contract types as an integer must be written as one. The request check coerces
// query strings with Number(), which also reads `0x10`, `1e1`, `1.0` and ` 1`: each would pass as a
// number its sender may not have meant. Checked on the query as it was sent, and ahead of whatever the
// request check found (Number(' ') is 0: "must be between 1 and 100" would mislead).
import type { Request } from 'express';
import { operationsOf, resolveRef, type OpenApiDocument } from '../contract.ts';
import { invalid, type ApiError } from './errors.ts';

const INTEGER = /^-?(?:0|[1-9][0-9]*)$/;

export function looseIntegers(spec: OpenApiDocument): (req: Request) => ApiError | undefined {
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
  const looseInteger = (req: Request) => {
    const names = integers.get(req.openapi?.schema?.operationId ?? '') ?? [];
    if (names.length === 0) return undefined;
    const sent = new URLSearchParams(req.originalUrl.split('?')[1] ?? '');
    // A repeated or empty parameter is the request check's to refuse, in its own words.
    const name = names.find((name) => sent.getAll(name).length === 1 && sent.get(name) !== '' && !INTEGER.test(sent.get(name)!));
    return name === undefined ? undefined : invalid(`The \`${name}\` must be an integer.`);
  };
  return looseInteger;
}
