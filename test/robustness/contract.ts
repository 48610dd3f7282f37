// The contract as the robustness suite reads it: every operation of openapi.yaml (so that a new one is
// driven without anyone listing it here), and a check of any response against what that operation
// declares, compiled with the server's own schema compiler.
import type { ValidateFunction } from 'ajv/dist/2020.js';
import addressparser from 'nodemailer/lib/addressparser';
import { resolveRef, schemaCompiler, type OpenApiDocument } from '../../server/contract.ts';

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Record<string, any>;
}

export interface Operation {
  operationId: string;
  method: string;
  /** The path template, `/contacts/{contact_id}`. */
  path: string;
  parameters: Parameter[];
  /** The JSON request body's schema, when the operation takes one. */
  body?: Record<string, any>;
  bodyRequired: boolean;
  /** Whether the operation needs an API key. */
  secured: boolean;
  responses: Record<string, any>;
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'head', 'options', 'trace'];
const pointer = (...parts: string[]) => parts.map((p) => '/' + p.replaceAll('~', '~0').replaceAll('/', '~1')).join('');

export function operations(spec: OpenApiDocument): Operation[] {
  return Object.entries(spec.paths).flatMap(([path, item]) =>
    METHODS.filter((method) => (item as any)[method]).map((method) => {
      const op = (item as any)[method];
      const parameters = [...((item as any).parameters ?? []), ...(op.parameters ?? [])].map((p) => resolveRef<Parameter>(spec, p));
      const requestBody = resolveRef(spec, op.requestBody);
      return {
        operationId: op.operationId,
        method: method.toUpperCase(),
        path,
        parameters,
        body: requestBody?.content?.['application/json']?.schema,
        bodyRequired: Boolean(requestBody?.required),
        secured: (op.security ?? spec.security ?? []).length > 0,
        responses: op.responses,
      };
    }),
  );
}

export interface Answer {
  status: number;
  contentType: string | undefined;
  text: string;
}

/**
 * Checks one response: a status the operation declares, never a 5xx, a JSON body that is
 * complete and valid against the response schema of that status, and for errors a `statusCode` equal
 * to the HTTP status. Returns what is wrong, or an empty list; `body` is the parsed JSON.
 */
export function responseChecker(spec: OpenApiDocument) {
  const compile = schemaCompiler(spec);
  const compiled = new Map<string, ValidateFunction>();
  const validator = (op: Operation, status: string): ValidateFunction | undefined => {
    const key = `${op.operationId} ${status}`;
    if (!compiled.has(key)) {
      const response = op.responses[status];
      if (!response) return undefined;
      // Through a $ref to a shared response, the schema lives under components; otherwise in place.
      const at = response.$ref ? response.$ref.slice(1) : pointer('paths', op.path, op.method.toLowerCase(), 'responses', status);
      const content = resolveRef(spec, response).content?.['application/json'];
      if (content) compiled.set(key, compile(`${at}${pointer('content', 'application/json', 'schema')}`));
    }
    return compiled.get(key);
  };

  return (op: Operation, answer: Answer): { problems: string[]; body: any } => {
    const problems: string[] = [];
    const status = String(answer.status);
    // The router answers 404 and 405 before any operation is matched, and an operation that takes no
    // body answers a broken one (400, 413, 415) as any other: those come under the `default` response.
    const generic = ['404', '405', ...(op.body ? [] : ['400', '413', '415'])];
    const declared = status in op.responses || (generic.includes(status) && 'default' in op.responses);
    if (!declared) problems.push(`status ${status} is not declared`);
    if (answer.status >= 500) problems.push(`status ${status}`);
    // A page (text/html) where the operation declares one for this status: its schema is a string.
    const declaredTypes = Object.keys(resolveRef(spec, op.responses[status])?.content ?? {});
    const mediaType = answer.contentType?.split(';')[0]!.trim();
    if (answer.status < 300 && mediaType && mediaType !== 'application/json' && declaredTypes.includes(mediaType)) return { problems, body: undefined };
    if (!answer.contentType?.startsWith('application/json')) problems.push(`content-type ${answer.contentType ?? 'none'}`);
    let body: any;
    try {
      body = JSON.parse(answer.text);
    } catch {
      problems.push(`body is not complete JSON (${answer.text.length} bytes: ${JSON.stringify(answer.text.slice(-80))})`);
      return { problems, body: undefined };
    }
    const validate = validator(op, declared && status in op.responses ? status : 'default');
    if (validate && !validate(body)) {
      problems.push(`body does not match the ${status} schema: ${validate.errors!.slice(0, 3).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ')}`);
    }
    if (answer.status >= 400 && body?.statusCode !== answer.status) problems.push(`error statusCode ${body?.statusCode} for HTTP ${status}`);
    // A message that names a field must name one.
    if (answer.status === 422 && /``/.test(body?.message ?? '')) problems.push('the message names an empty field');
    return { problems, body };
  };
}

/**
 * What the API means by a mailbox: exactly one `addr` or `Name <addr>`, no group, with an address that
 * has a local part and a dotted domain and no characters that would need quoting. Returns what is wrong.
 */
export function notOneMailbox(value: string): string | undefined {
  if (/[\u0000-\u001f\u007f]/.test(value)) return 'holds control characters';
  const parsed = addressparser(value);
  if (parsed.length !== 1) return `parses as ${parsed.length} mailboxes`;
  const [one] = parsed as { address?: string; group?: unknown[] }[];
  if (one!.group) return 'is a group';
  if (!/^[^\s"<>(),;:\\@]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$/.test(one!.address ?? '')) return `has the address ${JSON.stringify(one!.address)}`;
  return undefined;
}

/** Every value in `value` that `schema` types as a Mailbox, found by walking both together. */
export function mailboxesIn(spec: OpenApiDocument, schema: any, value: unknown, at = ''): { at: string; mailbox: string }[] {
  if (schema?.$ref === '#/components/schemas/Mailbox') return typeof value === 'string' ? [{ at, mailbox: value }] : [];
  const node = resolveRef(spec, schema);
  if (!node || typeof node !== 'object') return [];
  const branches = [...(node.oneOf ?? []), ...(node.anyOf ?? []), ...(node.allOf ?? [])];
  const found = branches.flatMap((branch: unknown) => mailboxesIn(spec, branch, value, at));
  if (Array.isArray(value) && node.items) value.forEach((item, i) => found.push(...mailboxesIn(spec, node.items, item, `${at}[${i}]`)));
  if (value && typeof value === 'object' && !Array.isArray(value) && node.properties) {
    for (const [key, child] of Object.entries(value)) if (node.properties[key]) found.push(...mailboxesIn(spec, node.properties[key], child, at ? `${at}.${key}` : key));
  }
  return found;
}

/** The JSON schema of one response of an operation, or undefined. */
export function responseSchema(spec: OpenApiDocument, op: Operation, status: number | string): Record<string, any> | undefined {
  const response = op.responses[String(status)] ?? op.responses.default;
  return resolveRef(spec, response)?.content?.['application/json']?.schema;
}
