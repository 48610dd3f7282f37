// The server's one import site of the generated contract types, and the handler types built on them:
// a handler that returns a field the spec lacks, or takes a parameter it does not declare, fails to compile.
import type { RequestHandler } from 'express';
import type { components, operations } from '../generated/schema.js';

export type Schemas = components['schemas'];
export type OperationId = keyof operations;
export type ErrorName = Schemas['ErrorName'];

type Responses<Op extends OperationId> = operations[Op]['responses'];
type JsonOf<R> = R extends { content: { 'application/json': infer Body } } ? Body : never;
type SuccessStatus<Op extends OperationId> = Extract<keyof Responses<Op>, 200 | 201>;
type Parameters<Op extends OperationId> = operations[Op]['parameters'];
type Defined<T> = T extends undefined | never ? Record<string, never> : NonNullable<T>;

export type SuccessBody<Op extends OperationId> = JsonOf<Responses<Op>[SuccessStatus<Op>]>;
export type RequestBody<Op extends OperationId> = operations[Op] extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : operations[Op] extends { requestBody?: { content: { 'application/json': infer B } } }
    ? B
    : undefined;
export type PathParams<Op extends OperationId> = Defined<Parameters<Op>['path']>;
export type QueryParams<Op extends OperationId> = Defined<Parameters<Op>['query']>;

/** An Express handler whose params, query, body and JSON response are those of one operation. */
export type OperationHandler<Op extends OperationId> = RequestHandler<
  PathParams<Op>,
  SuccessBody<Op>,
  RequestBody<Op>,
  QueryParams<Op>
>;
