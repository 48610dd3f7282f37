// The contract at run time: generated/openapi.yaml (openapi.yaml and the files under openapi/ it
// refers to, bundled into one document by `npm run generate`) loaded once, its schemas compiled with
// Ajv, so that every runtime check outside express-openapi-validator comes from the spec itself.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type Format, type Options, type ValidateFunction } from 'ajv/dist/2020.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { load } from 'js-yaml';

/** A file of the project by its path from the root: this module sits one level down, in server/ or bundled in build/. */
export const projectFile = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

export const specPath = projectFile('generated/openapi.yaml');

export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components: Record<string, Record<string, unknown>>;
  [key: string]: unknown;
};

export function loadSpec(path: string = specPath): OpenApiDocument {
  // js-yaml rather than yaml: it parses the contract with half the memory, and start-up memory counts.
  const spec = load(readFileSync(path, 'utf8')) as OpenApiDocument;
  const fault = faultOf(spec);
  if (fault) throw new Error(`the contract at ${path} is invalid: ${fault}`);
  return spec;
}

/**
 * What the server needs of a contract before it can start: the rest of what makes one valid is
 * redocly's to check (npm run lint:spec) before it is bundled, and the validator's as it reads it.
 */
function faultOf(spec: unknown): string | undefined {
  const isObject = (value: unknown): value is Record<string, any> => typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isObject(spec) || typeof spec.openapi !== 'string' || !spec.openapi.startsWith('3.1.')) return 'it is not an OpenAPI 3.1 document';
  if (!isObject(spec.paths) || !isObject(spec.components) || !isObject(spec.components.schemas)) return 'it has no paths or no component schemas';
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const [method, operation] of Object.entries(isObject(item) ? item : {}).filter(([method]) => HTTP_METHODS.has(method))) {
      if (!isObject(operation) || typeof operation.operationId !== 'string') return `${method.toUpperCase()} ${path} has no operationId`;
      if (!isObject(operation.responses) || !Object.values(operation.responses).every(isObject)) return `${method.toUpperCase()} ${path} has no responses, or one that is not an object`;
    }
  }
  return undefined;
}

const SPEC_ID = 'mailroom:openapi';

/**
 * The one set of validation rules. What a request may carry must always be returnable, so the request
 * check, the response check (both express-openapi-validator) and schemaCompiler below must agree on
 * every keyword. FORMATS are the implementations of `format`: ajv-formats' full ones, which read
 * `email` as a dot-atom local part (no leading, trailing or doubled dots) at a domain of at least two
 * labels; its "fast" ones, the validator's default, let `a@localhost` and `a..b@x` in, which the full
 * check then refused on the way out. AJV_OPTIONS are the options the validator 5.6 gives its own Ajv
 * (framework/ajv/options.js; test/server/validator-wiring.test.ts fails if that changes).
 */
export const FORMATS: Record<string, Format> = { ...fullFormats, 'date-time': { ...(fullFormats['date-time'] as object), validate: dateTime } };
export const AJV_OPTIONS = {
  // strict: false because OpenAPI adds keywords JSON Schema does not know (example, discriminator).
  strict: false,
  strictNumbers: true,
  strictTuples: true,
  allowUnionTypes: false,
  validateSchema: false,
  formats: FORMATS,
} as const satisfies Options;

/** The format options of express-openapi-validator that give it exactly FORMATS. */
export const VALIDATOR_FORMATS = {
  validateFormats: true,
  ajvFormats: { mode: 'full' },
  // Applied last, over the validator's own and ajv-formats' formats: the same functions as ours.
  formats: FORMATS,
} as const;

/**
 * ajv-formats' full `date-time` check, with a short way for the form the server writes (toISOString's
 * `2026-01-02T03:04:05.678Z`): one test of a regular expression instead of a split and two matches.
 * A page of 100 contacts holds 200 of them, and the check was a twentieth of the page's time. It
 * accepts exactly what the full check accepts (a valid day of a valid month; 23:59:60 as a leap
 * second); any other form goes to the full check. test/server/date-time-format.test.ts compares them.
 */
function dateTime(value: string): boolean {
  if (!CANONICAL.test(value)) return fullDateTime(value);
  const year = digits(value, 0, 4);
  const month = digits(value, 5, 2);
  const day = digits(value, 8, 2);
  const hour = digits(value, 11, 2);
  const minute = digits(value, 14, 2);
  const second = digits(value, 17, 2);
  const leapYear = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const daysInMonth = month === 2 ? (leapYear ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth) return false;
  return (hour <= 23 && minute <= 59 && second <= 59) || (hour === 23 && minute === 59 && second === 60);
}

const fullDateTime = (fullFormats['date-time'] as { validate: (value: string) => boolean }).validate;
// [0-9], not \d: the same thing without the u flag, said plainly, since digits() reads char codes.
const CANONICAL = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/;
const digits = (value: string, from: number, count: number) => {
  let number = 0;
  for (let at = from; at < from + count; at++) number = number * 10 + value.charCodeAt(at) - 48;
  return number;
};

/** Compiles any schema inside the document, addressed by JSON pointer (`/components/schemas/Contact`). */
export function schemaCompiler(spec: OpenApiDocument): (pointer: string) => ValidateFunction {
  // verbose keeps the failing schema with each error, so that messages can quote its description.
  const ajv = new Ajv2020({ ...AJV_OPTIONS, allErrors: true, verbose: true });
  ajv.addSchema(spec as object, SPEC_ID);
  return (pointer) => ajv.compile({ $ref: `${SPEC_ID}#${pointer}` });
}

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** Each operation under the contract's `paths`, with its method (its `webhooks` are posted by the server, not answered). */
export function operationsOf(spec: OpenApiDocument): { path: string; method: string; operation: Record<string, any> }[] {
  return Object.entries(spec.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.has(method))
      .map(([method, operation]) => ({ path, method, operation: operation as Record<string, any> })),
  );
}

/** Follows local `$ref`s until it reaches a node that is not a reference. */
export function resolveRef<T = any>(spec: OpenApiDocument, node: any): T {
  while (node && typeof node.$ref === 'string') {
    node = node.$ref
      .slice(2)
      .split('/')
      .reduce((at: any, key: string) => at?.[key.replaceAll('~1', '/').replaceAll('~0', '~')], spec);
  }
  return node;
}
