// The request check's refusals, said the way a person fixing the request needs them: which field, and
// what it must be. Every decision rests on structure alone: the validator's error items (`path`, and
// `errorCode`, `<Ajv keyword>.openapi.validation`, absent for the validator's own checks), the request
// itself, and the contract's schema at the failing field. A library's words decide nothing: they are
// passed on only where nothing structured says the same (the form reader's bounds, a keyword of Ajv's
// that the schema does not put in other words).
import type { ErrorObject } from 'ajv/dist/2020.js';
import type { Request } from 'express';
import type { ErrorName } from '../api.ts';
import { resolveRef, type OpenApiDocument } from '../contract.ts';
import { quoted } from '../quoted.ts';

/** An item of express-openapi-validator's `errors`. */
export interface ValidatorErrorItem {
  path: string;
  message: string;
  errorCode?: string;
}

export interface Refusal {
  message: string;
  name: ErrorName;
}

const refusal = (message: string, name: ErrorName = 'validation_error'): Refusal => ({ message, name });

/** The first failure of the request check, in words; undefined when the validator gave no item. */
export function requestRefusal(items: ValidatorErrorItem[], req: Request, spec: OpenApiDocument): Refusal | undefined {
  const item = items.find(matchedNoBranch) ?? items.find((error, _, all) => !wrongBranch(error, all));
  if (!item) return undefined;
  if (!item.errorCode) return validatorCheck(item, req, spec);
  const [, location, ...rest] = item.path.split('/');
  const at = rest.join('.');
  const field = at || 'body'; // an error about the body as a whole has no path below it
  const keyword = item.errorCode.split('.')[0]!;
  const name: ErrorName = location === 'params' ? 'invalid_parameter' : 'validation_error';
  // The query parser turns a repeated parameter, or one named as a list (`x[]=`), into a list, which a parameter that is no list refuses by its type.
  if (location === 'query' && keyword === 'type' && Array.isArray(req.query[field])) {
    if (timesGiven(req, field) > 1) return refusal(`The \`${field}\` is given more than once; give it once.`, name);
    return refusal(`The \`${field}\` takes one value, not a list: give it as \`${field}=…\`.`, name);
  }
  if (keyword === 'required') {
    const [parent, own] = splitField(field);
    const choice = location === 'body' ? fieldChoice(bodySchema(req, spec, parent)) : undefined;
    if (choice?.includes(own)) return refusal(`Missing ${choice.map((one) => `\`${joinField(parent, one)}\``).join(' or ')} field.`, 'missing_required_field');
    const when = location === 'body' ? dependency(req, spec, field, (rule) => rule.required?.includes(field)) : undefined;
    return refusal(when ? `Missing \`${field}\` field; it is required with \`${when}\`.` : `Missing \`${field}\` field.`, 'missing_required_field');
  }
  if (keyword === 'additionalProperties') return refusal(`The field ${quoted(field)} is not supported.`);
  if (keyword === 'false schema') {
    const when = location === 'body' ? dependency(req, spec, field, (rule) => rule.properties?.[field] === false) : undefined;
    if (when) return refusal(`The field \`${field}\` cannot be combined with \`${when}\`.`);
  }
  if ((keyword === 'minProperties' || keyword === 'maxProperties') && location === 'body' && field === 'body') {
    // A body that takes exactly one of its fields (minProperties and maxProperties 1), such as removing suppressions by `emails` or by `ids`.
    const choice = bodySchema(req, spec);
    if (choice?.minProperties === 1 && choice?.maxProperties === 1) {
      const names = Object.keys(choice.properties ?? {}).map((name) => `\`${name}\``).join(' or ');
      return keyword === 'minProperties' ? refusal(`Missing ${names} field.`, 'missing_required_field') : refusal(`Give ${names}, not both.`);
    }
    if (keyword === 'minProperties' && choice?.minProperties === 1) return refusal('The body is empty: give at least one field to change.', 'missing_required_field');
  }
  // As the contract writes it, `$ref` and the keywords beside it, and with the reference followed.
  const written = location === 'body' ? bodyNode(req, spec, at) : parameterSchema(req, spec, location, at);
  const schema = resolveRef(spec, written);
  if (keyword === 'const') {
    const when = location === 'body' ? dependency(req, spec, field, (rule) => rule.properties?.[field]?.const !== undefined) : undefined;
    if (when) return refusal(`The \`${field}\` must be \`${JSON.stringify(bodySchema(req, spec).dependentSchemas[when].properties[field].const)}\` with \`${when}\`.`, name);
  }
  if (keyword === 'anyOf' || keyword === 'oneOf') {
    const choice = fieldChoice(schema);
    // `required` holds for anything but an object: a value of another type passes both branches.
    if (choice && !isObject(valueAt(req.body, at))) return refusal(`The \`${field}\` must be an object.`, name);
    if (choice) return refusal(`Give ${choice.map((one) => `\`${joinField(at, one)}\``).join(' or ')}, not both.`, name);
    if (schema?.description) return refusal(`The \`${field}\` must be ${lowerFirst(schema.description)}`, name);
  }
  const words = mustBe(keyword, withKeyword(spec, written, keyword));
  // Ajv's own words, as they are, for a keyword the contract's schema does not put in other words.
  return refusal(`The \`${field}\` ${words ?? item.message}.`, name);
}

/** One of the validator's own checks, before the schema's (it gives them no errorCode). */
function validatorCheck(item: ValidatorErrorItem, req: Request, spec: OpenApiDocument): Refusal {
  if (item.path === req.path) {
    // Routing: a path parameter that does not decode.
    if (!decodes(req.path)) return refusal('The path is not percent-encoded correctly (a % must be followed by two hexadecimal digits, encoding UTF-8).', 'invalid_parameter');
    if (req.is('multipart/form-data')) {
      // Without a boundary the form cannot be read at all; with one, the form reader (multer) stopped
      // at one of the bounds app.ts sets, which only its own words name.
      if (!/;\s*boundary\s*=/i.test(req.get('content-type') ?? '')) return refusal('The body is not a well-formed multipart/form-data form.');
      return refusal(`The form is refused: ${lowerFirst(item.message)}.`);
    }
  }
  const [, location, ...rest] = item.path.split('/');
  const field = rest.join('.');
  if (location === 'query' && field) {
    const parameter = declaredParameter(req, spec, 'query', field);
    if (!parameter) return refusal(`Unknown query parameter ${quoted(field)}.`);
    if (holdsReserved(req, parameter)) return refusal(`The \`${field}\` must be percent-encoded: its value holds a character with a meaning in URLs (one of ${RESERVED}).`);
    if (req.query[field] === '') return refusal(`The \`${field}\` must not be empty: give it a value, or leave it out.`);
  }
  return refusal(field ? `The \`${field}\` is not valid.` : 'The request is not valid.', location === 'params' ? 'invalid_parameter' : 'validation_error');
}

const decodes = (path: string) => {
  try {
    decodeURIComponent(path);
    return true;
  } catch {
    return false;
  }
};

/** The characters with a meaning in URLs (RFC 3986's reserved), which a query value must percent-encode unless its parameter allows them. */
const RESERVED = ":/?#[]@!$&'()*+,;=";

/** Whether a value of the parameter, as the raw URL has it, holds a reserved character (a comma is a list's delimiter when it does not explode). */
function holdsReserved(req: Request, parameter: any): boolean {
  if (parameter.allowReserved) return false;
  const reserved = [...RESERVED].filter((c) => c !== ',' || parameter.explode !== false);
  const query = req.originalUrl.split('?').slice(1).join('?');
  return query.split('&').some((pair) => {
    const [key, value = ''] = pair.split('=');
    return key === parameter.name && [...value].some((c) => reserved.includes(c));
  });
}

/**
 * A union (oneOf, anyOf) whose value no branch took: every branch refused the whole value by its type
 * (`to: null`) or its enum (an unknown webhook event), or, for a parameter (an id or an address), by
 * its type, format or pattern; nothing failed below it. The union's own words then say what the value
 * may be, where the first branch's reason would say only what it alone takes. (In a body, one branch
 * refusing by pattern is the branch the caller meant, whose words say more: wrongBranch.)
 */
function matchedNoBranch(error: ValidatorErrorItem, _: number, all: ValidatorErrorItem[]): boolean {
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
function wrongBranch(error: ValidatorErrorItem, all: ValidatorErrorItem[]): boolean {
  if (!error.errorCode?.startsWith('type.')) return false;
  const atUnion = all.some((other) => /^(oneOf|anyOf)\./.test(other.errorCode ?? '') && other.path === error.path);
  const tookIt = (other: ValidatorErrorItem) => (other.path === error.path ? !/^(type|oneOf|anyOf)\./.test(other.errorCode ?? '') : other.path.startsWith(`${error.path}/`));
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
  return `The \`${field(first.instancePath) || 'email'}\` ${mustBe(first.keyword, first.parentSchema) ?? first.message ?? 'is not valid'}.`;
}

/** The contract gives a pattern's meaning in words beside it, for refusals: "The `subject` must be <meaning>." */
const PATTERN_MEANING = 'x-pattern-meaning';

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
};

const FORMAT_NAMES: Record<string, string> = { uuid: 'a valid UUID', email: 'a valid email address' };

/**
 * What a value must be to pass `keyword` of `schema` (the schema that holds the keyword), as a person
 * would say it: "must not be empty" rather than "must NOT have fewer than 1 characters". Undefined for
 * a keyword the schema alone does not put in words.
 */
function mustBe(keyword: string, schema: any): string | undefined {
  if (!schema || typeof schema !== 'object' || (schema[keyword] === undefined && keyword !== 'minimum' && keyword !== 'maximum')) return undefined;
  const limit: unknown = schema[keyword];
  const count = (n: number, unit: string) => `${n.toLocaleString('en')} ${unit}`;
  switch (keyword) {
    case 'type':
      return `must be ${[limit].flat().map((type) => TYPE_NAMES[String(type)] ?? String(type)).join(' or ')}`;
    case 'format':
      return `must be ${FORMAT_NAMES[String(limit)] ?? `a valid ${limit}`}`;
    case 'pattern':
      return typeof schema[PATTERN_MEANING] === 'string' ? `must be ${schema[PATTERN_MEANING]}` : `must match pattern "${limit}"`;
    case 'enum':
      return Array.isArray(limit) ? `must be one of ${limit.map((value) => `\`${value}\``).join(', ')}` : undefined;
    case 'const':
      return `must be \`${limit}\``;
    case 'minimum':
    case 'maximum':
      if (typeof schema.minimum === 'number' && typeof schema.maximum === 'number') return `must be between ${schema.minimum} and ${schema.maximum}`;
      if (typeof limit !== 'number') return undefined;
      return `must be ${keyword === 'minimum' ? '>=' : '<='} ${limit}`;
    case 'minLength':
      if (typeof limit !== 'number') return undefined;
      return limit === 1 ? 'must not be empty' : `must be at least ${count(limit, 'characters')} long`;
    case 'maxLength':
      return typeof limit === 'number' ? `must be at most ${count(limit, 'characters')} long` : undefined;
    case 'minItems':
    case 'minProperties': {
      if (typeof limit !== 'number') return undefined;
      const unit = keyword === 'minItems' ? 'item' : 'field';
      return limit === 1 ? `must have at least one ${unit}` : `must have at least ${count(limit, `${unit}s`)}`;
    }
    case 'maxItems':
    case 'maxProperties':
      return typeof limit === 'number' ? `must have at most ${count(limit, keyword === 'maxItems' ? 'items' : 'fields')}` : undefined;
  }
  return undefined;
}

/**
 * The schema that holds `keyword` for a field: the field's own, or the branch of its union (oneOf,
 * anyOf, allOf) that has it, or, for an object, the schema of its keys (propertyNames).
 */
function withKeyword(spec: OpenApiDocument, schema: any, keyword: string): any {
  const candidates = alternatives(spec, schema);
  const keys = candidates.find((candidate) => candidate.propertyNames)?.propertyNames;
  return candidates.find((candidate) => candidate[keyword] !== undefined) ?? (keys ? withKeyword(spec, keys, keyword) : undefined);
}

/**
 * A schema, what it refers to (a `$ref` applies beside the keywords next to it, as `minLength` beside
 * a shared text type), and the branches of its unions, itself first.
 */
function alternatives(spec: OpenApiDocument, schema: any, seen = new Set<unknown>()): any[] {
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return []; // a schema may refer to itself
  seen.add(schema);
  const referred = typeof schema.$ref === 'string' ? alternatives(spec, resolveRef(spec, { $ref: schema.$ref }), seen) : [];
  const branches = [schema.oneOf, schema.anyOf, schema.allOf].flatMap((list) => (Array.isArray(list) ? list : []));
  return [schema, ...referred, ...branches.flatMap((branch) => alternatives(spec, branch, seen))];
}

/** The operation the request was routed to in the contract. */
function operationOf(req: Request, spec: OpenApiDocument): { item: any; operation: any } {
  const route = req.openapi?.openApiRoute;
  const item: any = route ? spec.paths[route.replace(/:(\w+)/g, '{$1}')] : undefined;
  return { item, operation: item?.[req.method.toLowerCase()] };
}

/**
 * The schema the contract gives the request's body, or a field of it (`topics.0.id`), through
 * properties, items, the branches of unions and references, as written there.
 */
function bodyNode(req: Request, spec: OpenApiDocument, field = ''): any {
  const content = resolveRef(spec, operationOf(req, spec).operation?.requestBody)?.content ?? {};
  let schema = (Object.values(content)[0] as { schema?: unknown } | undefined)?.schema;
  for (const step of field ? field.split('.') : []) schema = childSchema(spec, schema, step);
  return schema;
}

/** bodyNode, its reference followed. */
const bodySchema = (req: Request, spec: OpenApiDocument, field = ''): any => resolveRef(spec, bodyNode(req, spec, field));

/** The schema of an object's key or an array's item, in the schema or the first of its branches that names one. */
function childSchema(spec: OpenApiDocument, schema: any, step: string): unknown {
  for (const candidate of alternatives(spec, schema)) {
    if (/^\d+$/.test(step) && candidate.items) return candidate.items;
    const named = candidate.properties?.[step] ?? Object.entries(candidate.patternProperties ?? {}).find(([pattern]) => new RegExp(pattern, 'u').test(step))?.[1];
    // A key the object does not name (a contact property's) is described by its additionalProperties.
    const child = named ?? (typeof candidate.additionalProperties === 'object' ? candidate.additionalProperties : undefined);
    if (child) return child;
  }
  return undefined;
}

/** The parameter the operation (or its path) declares in `location` (query, params, headers) by that name. */
function declaredParameter(req: Request, spec: OpenApiDocument, location: string | undefined, name: string): any {
  const where = location === 'params' ? 'path' : location === 'headers' ? 'header' : location;
  const { item, operation } = operationOf(req, spec);
  const parameters = [...(item?.parameters ?? []), ...(operation?.parameters ?? [])].map((p) => resolveRef(spec, p));
  // Header names are case-insensitive, and the validator reports them in lower case.
  return parameters.find((p) => p.in === where && (where === 'header' ? p.name.toLowerCase() === name.toLowerCase() : p.name === name));
}

/** A parameter's schema, with the parameter's description (which says what a union of ids and addresses may be). */
function parameterSchema(req: Request, spec: OpenApiDocument, location: string | undefined, name: string): any {
  const parameter = declaredParameter(req, spec, location, name);
  return parameter ? { ...resolveRef(spec, parameter.schema), description: parameter.description } : undefined;
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

/** The field whose presence brings in the rule (a `dependentSchemas` entry of the body) that `field` broke. */
function dependency(req: Request, spec: OpenApiDocument, field: string, broke: (rule: any) => boolean): string | undefined {
  const rules: Record<string, any> = bodySchema(req, spec)?.dependentSchemas ?? {};
  return Object.entries(rules).find(([when, rule]) => when in (req.body ?? {}) && broke(rule))?.[0];
}

const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);
const valueAt = (body: unknown, field: string): unknown => (field ? field.split('.') : []).reduce<any>((at, step) => at?.[step], body);

/** `attachments.0.content` as its object's field and its own name: [`attachments.0`, `content`]. */
const splitField = (field: string): [string, string] => {
  const at = field.lastIndexOf('.');
  return at < 0 ? ['', field] : [field.slice(0, at), field.slice(at + 1)];
};
const joinField = (parent: string, name: string) => (parent ? `${parent}.${name}` : name);

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

/** How many times the request's query string names the parameter, as itself or as a list (`field[]`, `field[0]`). */
function timesGiven(req: Request, field: string): number {
  const query = req.originalUrl.split('?')[1] ?? '';
  return [...new URLSearchParams(query).keys()].filter((key) => key === field || key.startsWith(`${field}[`)).length;
}
