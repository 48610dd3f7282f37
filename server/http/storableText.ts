// Text that both stores keep exactly as given. PostgreSQL refuses NUL in text (error 22021) where SQLite
// stores it, and a lone surrogate is rewritten to U+FFFD on the way to UTF-8 (once by PostgreSQL, three
// times by SQLite). So every string of a request (path and query parameters, body values and keys) is
// checked here, once for all operations, after the contract check, and refused with a 422 naming it.
// Other control characters are left alone: both stores keep them, and bodies carry tabs and line
// breaks; what may go into a mail header is the sending code's concern.
//
// Numbers too: a query parameter of `Infinity` or `1e400` is coerced to a number that Ajv passes
// unchecked (it skips minimum, maximum and format for a number that is not finite), and no store
// takes it as a LIMIT.
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import type { RequestHandler } from 'express';
import type { ErrorName } from '../api.ts';
import { invalid } from './errors.ts';

export interface TextFault {
  /** Where the string is: keys and array indexes from the value's root. */
  path: string[];
  /** What is wrong with it, as the end of "The `field` …". */
  problem: string;
}

const LONE_SURROGATE = /\p{Cs}/u;

/** What in `text` a store would not keep, if anything. */
function unstorable(text: string): string | undefined {
  if (text.includes('\u0000')) return 'the NUL character';
  if (LONE_SURROGATE.test(text)) return 'a lone surrogate (it is not valid Unicode)';
  return undefined;
}

/** The first string (or number that is not finite) in `value`, a parsed JSON body or parameters, that a store would not keep as given. */
export function findUnstorableText(value: unknown, path: string[] = []): TextFault | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path: [...path], problem: 'must be a finite number' };
  if (typeof value === 'string') {
    const what = unstorable(value);
    return what ? { path: [...path], problem: `must not contain ${what}` } : undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  // Runs on requests the contract check has passed, so their size and nesting are bounded.
  for (const [key, item] of Object.entries(value)) {
    const inKey = Array.isArray(value) ? undefined : unstorable(key);
    if (inKey) return { path: [...path], problem: `must not have a key containing ${inKey}` };
    path.push(key);
    const fault = findUnstorableText(item, path);
    path.pop();
    if (fault) return fault;
  }
  return undefined;
}

/** Refuses a request holding such a string: parameters as invalid_parameter, body fields as validation_error. */
export const refuseUnstorableText: RequestHandler = (req, _res, next) => {
  const places: [unknown, ErrorName][] = [
    [req.openapi?.pathParams, 'invalid_parameter'],
    [req.query, 'invalid_parameter'],
    [req.body, 'validation_error'],
  ];
  for (const [values, name] of places) {
    const fault = findUnstorableText(values);
    if (fault) throw invalid(`The \`${fault.path.join('.') || 'body'}\` ${fault.problem}.`, name);
  }
  next();
};

/**
 * The same rule for checks that run ahead of the request check (the emails of a batch, one at a time):
 * `validate`, then this, reported as one more schema error so that the usual wording names the field.
 */
export function withStorableText(validate: ValidateFunction): ValidateFunction {
  const check = ((data: unknown) => {
    if (!validate(data)) {
      check.errors = validate.errors;
      return false;
    }
    const fault = findUnstorableText(data);
    check.errors = fault ? [textError(fault)] : null;
    return !fault;
  }) as ValidateFunction;
  return check;
}

function textError({ path, problem }: TextFault): ErrorObject {
  const instancePath = path.map((key) => `/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
  return { keyword: 'storableText', instancePath, schemaPath: '#', params: {}, message: problem };
}
