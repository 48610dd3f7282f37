// Checks of the contract itself: openapi.yaml must state what docs/design.md requires.
import { describe, expect, it } from 'vitest';
import { loadSpec, schemaCompiler } from '../server/contract.ts';

type Obj = Record<string, any>;
const document = loadSpec();
const spec: Obj = document;
const compile = schemaCompiler(document);
const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'head', 'options', 'trace'];
const escape = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');

/** Follows a local $ref, returning the target and its JSON pointer. */
function deref(node: Obj, pointer: string): [Obj, string] {
  if (typeof node?.$ref !== 'string') return [node, pointer];
  const target = node.$ref.slice(1);
  const value = target.split('/').slice(1).reduce((o: Obj, k: string) => o[k.replaceAll('~1', '/').replaceAll('~0', '~')], spec);
  return deref(value, target);
}

const operations = Object.entries(spec.paths).flatMap(([path, item]) =>
  Object.entries(item as Obj)
    .filter(([method]) => METHODS.includes(method))
    .map(([method, op]) => ({ path, method, op: op as Obj, pointer: `/paths/${escape(path)}/${method}` })),
);

function operation(id: string): Obj {
  const found = operations.find((o) => o.op.operationId === id);
  if (!found) throw new Error(`no operation ${id}`);
  return found.op;
}

/** Every example in the document, with the pointer of the schema it must satisfy. */
function examples(): { where: string; schema: string; value: unknown }[] {
  const found: { where: string; schema: string; value: unknown }[] = [];
  const mediaTypes = (content: Obj | undefined, pointer: string, where: string) => {
    for (const [type, media] of Object.entries(content ?? {})) {
      const base = `${pointer}/content/${escape(type)}`;
      for (const [name, ex] of Object.entries((media as Obj).examples ?? {})) {
        found.push({ where: `${where} example ${name}`, schema: `${base}/schema`, value: deref(ex as Obj, '')[0].value });
      }
    }
  };
  for (const { op, pointer, method, path } of operations) {
    const where = `${method.toUpperCase()} ${path}`;
    if (op.requestBody) {
      const [body, at] = deref(op.requestBody, `${pointer}/requestBody`);
      mediaTypes(body.content, at, `${where} request`);
    }
    for (const [status, response] of Object.entries(op.responses as Obj)) {
      const [res, at] = deref(response as Obj, `${pointer}/responses/${status}`);
      mediaTypes(res.content, at, `${where} ${status}`);
    }
  }
  for (const [name, param] of Object.entries(spec.components.parameters as Obj)) {
    if ('example' in param) found.push({ where: `parameter ${name}`, schema: `/components/parameters/${name}/schema`, value: param.example });
  }
  for (const [name, schema] of Object.entries(spec.components.schemas as Obj)) {
    for (const value of schema.examples ?? []) found.push({ where: `schema ${name}`, schema: `/components/schemas/${name}`, value });
  }
  return found;
}

describe('operations', () => {
  it('every operation has a unique camelCase operationId, a summary and a description', () => {
    const ids = operations.map(({ op }) => op.operationId);
    expect(operations.length).toBeGreaterThanOrEqual(13);
    for (const { op, method, path } of operations) {
      expect(op.operationId, `${method} ${path}`).toMatch(/^[a-z][a-zA-Z]+$/);
      // Sentence case, as redocly.yaml's rule has it: acronyms (API) keep their capitals.
      expect(op.summary, op.operationId).toMatch(/^[A-Z][a-z]+( ([a-z0-9]+|[A-Z]{2,}))*$/);
      expect(op.description, op.operationId).toMatch(/\.$/);
    }
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('names the three core operations where docs/design.md places them', () => {
    expect(spec.paths['/contacts']?.get).toMatchObject({ operationId: 'listContacts' });
    expect(spec.paths['/emails/batch']?.post).toMatchObject({ operationId: 'sendBatchEmails' });
    expect(spec.paths['/broadcasts/{broadcast_id}']?.get).toMatchObject({ operationId: 'getBroadcast' });
  });

  it('requires a full_access key everywhere but the sends, which a sending_access key may call, the health check, the unsubscribe pages and attachment downloads', () => {
    expect(spec.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(spec.security).toEqual([{ bearerAuth: ['full_access'] }]);
    const own = Object.fromEntries(operations.filter(({ op }) => op.security !== undefined).map(({ op }) => [op.operationId, op.security]));
    expect(own).toEqual({
      sendEmail: [{ bearerAuth: ['sending_access'] }],
      sendBatchEmails: [{ bearerAuth: ['sending_access'] }],
      getHealth: [],
      getUnsubscribePage: [],
      unsubscribeOneClick: [],
      downloadAttachment: [],
    });
  });

  it('every error response, default included, has a JSON body of the Error schema', () => {
    let checked = 0;
    for (const { op } of operations) {
      expect(op.responses.default, op.operationId).toBeDefined();
      const statuses = Object.keys(op.responses).filter((s) => s === 'default' || Number(s) >= 400);
      expect(statuses.length, op.operationId).toBeGreaterThan(1);
      for (const status of statuses) {
        const [res] = deref(op.responses[status], '');
        expect(res.content?.['application/json']?.schema, `${op.operationId} ${status}`).toEqual({ $ref: '#/components/schemas/Error' });
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(80);
  });

  it('every response to a keyed operation declares the three RateLimit headers, but for an unknown key (403) or an unreachable store (503); 429 and 503 declare Retry-After', () => {
    const header = (name: string) => ({ $ref: `#/components/headers/${name}` });
    const rateLimit = { 'RateLimit-Limit': header('RateLimitLimit'), 'RateLimit-Remaining': header('RateLimitRemaining'), 'RateLimit-Reset': header('RateLimitReset') };
    const keyUnread = ['#/components/responses/Forbidden', '#/components/responses/ServiceUnavailable'];
    let checked = 0;
    for (const { op } of operations.filter(({ op }) => op.security?.length !== 0)) {
      for (const [status, response] of Object.entries(op.responses as Obj)) {
        const where = `${op.operationId} ${status}`;
        const headers = deref(response as Obj, '')[0].headers ?? {};
        if (keyUnread.includes((response as Obj).$ref)) expect(headers['RateLimit-Limit'], where).toBeUndefined();
        else expect(headers, where).toMatchObject(rateLimit);
        if (status === '429' || status === '503') expect(headers['Retry-After'], where).toEqual(header('RetryAfter'));
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(600);
  });

  it('the Error schema lists every name docs/design.md gives', () => {
    const names = spec.components.schemas.ErrorName.enum;
    for (const name of ['missing_api_key', 'invalid_api_key', 'restricted_api_key', 'validation_error', 'missing_required_field',
      'invalid_parameter', 'not_found', 'invalid_idempotent_request', 'concurrent_idempotent_requests', 'invalid_idempotency_key',
      'rate_limit_exceeded']) {
      expect(names).toContain(name);
    }
    expect(spec.components.schemas.Error.required).toEqual(['statusCode', 'message', 'name']);
  });
});

describe('examples', () => {
  const all = examples();

  it('exist for every request body and every response, in every media type', () => {
    const everyType = (content: Obj, where: string) => {
      expect(Object.keys(content), where).not.toHaveLength(0);
      for (const [type, media] of Object.entries(content)) expect(Object.keys((media as Obj).examples ?? {}), `${where} ${type}`).not.toHaveLength(0);
    };
    for (const { op, method, path } of operations) {
      const where = `${method} ${path}`;
      if (op.requestBody) everyType(deref(op.requestBody, '')[0].content, where);
      for (const [status, response] of Object.entries(op.responses as Obj)) everyType(deref(response, '')[0].content, `${where} ${status}`);
    }
    expect(all.length).toBeGreaterThan(100);
  });

  it.each(all.map((e) => [e.where, e] as const))('%s validates against its schema', (_, { schema, value }) => {
    const validate = compile(schema);
    expect(validate(value), JSON.stringify(validate.errors)).toBe(true);
  });

  it('are checked for real: a broken example fails its schema', () => {
    const validate = compile('/components/schemas/Broadcast');
    const draft = spec.components.examples.BroadcastDraft.value;
    expect(validate(draft)).toBe(true);
    expect(validate({ ...draft, status: 'drafted' })).toBe(false);
    expect(validate({ ...draft, created_at: '2026-11-21T10:04:05Z' })).toBe(false);
    const { reply_to: _, ...withoutReplyTo } = draft;
    expect(validate(withoutReplyTo)).toBe(false);
  });
});

describe('the core limits are schema, not prose', () => {
  const sendBatch = operation('sendBatchEmails');
  const [batch] = deref(sendBatch.requestBody.content['application/json'].schema, '');
  const [batchItem] = deref(batch.items, '');
  // A batch's email is OutgoingEmail with `scheduled_at` refused.
  const [item] = deref(batchItem.allOf[0], '');
  const param = (op: Obj, name: string) => op.parameters.map((p: Obj) => deref(p, '')[0]).find((p: Obj) => p.name === name);

  it('a batch holds 1 to 100 emails', () => {
    expect(batch).toMatchObject({ type: 'array', minItems: 1, maxItems: 100 });
  });

  it('`to` takes one address or an array of 1 to 50; cc and bcc likewise, an empty array among them (as Resend takes it)', () => {
    for (const field of ['to', 'cc', 'bcc']) {
      const [recipients] = deref(item.properties[field], '');
      const array = recipients.oneOf.map((s: Obj) => deref(s, '')[0]).find((s: Obj) => s.type === 'array');
      expect(array, field).toMatchObject({ maxItems: 50 });
      expect(array.minItems ?? 0, field).toBe(field === 'to' ? 1 : 0);
    }
    expect(item.required).toContain('to');
    expect(item.additionalProperties).toBe(false);
  });

  it('attachments and scheduled_at are part of a single email, not of a batch item', () => {
    const email = { from: 'a@b.co', to: 'c@d.co', subject: 's', text: 't' };
    const attachments = [{ filename: 'a.txt', content: 'aGk=' }];
    expect(compile('/components/schemas/OutgoingEmail')({ ...email, scheduled_at: 'in 1 min', attachments })).toBe(true);
    expect(compile('/components/schemas/BatchEmail')({ ...email, scheduled_at: 'in 1 min' })).toBe(false);
    expect(compile('/components/schemas/BatchEmail')({ ...email, attachments })).toBe(false);
    expect(compile('/components/schemas/BatchEmail')(email)).toBe(true);
    expect(operation('sendEmail').requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/OutgoingEmail');
  });

  it('a template cannot be combined with html or text', () => {
    const validate = compile('/components/schemas/OutgoingEmail');
    expect(validate({ to: 'c@d.co', template: { id: 'welcome' } })).toBe(true);
    expect(validate({ to: 'c@d.co', template: { id: 'welcome' }, html: '<p>x</p>' })).toBe(false);
    expect(validate({ to: 'c@d.co', template: { id: 'welcome' }, text: 'x' })).toBe(false);
  });

  it('Idempotency-Key is 1 to 256 characters; x-batch-validation is strict or permissive', () => {
    expect(param(sendBatch, 'Idempotency-Key')).toMatchObject({ in: 'header', schema: { maxLength: 256, minLength: 1 } });
    expect(param(operation('sendEmail'), 'Idempotency-Key').schema.maxLength).toBe(256);
    expect(param(sendBatch, 'x-batch-validation').schema).toEqual({ type: 'string', enum: ['strict', 'permissive'], default: 'strict' });
  });

  it('limit is 1..100 and both cursors are contact ids', () => {
    const list = operation('listContacts');
    expect(param(list, 'limit').schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100 });
    for (const cursor of ['after', 'before']) {
      expect(deref(param(list, cursor).schema, '')[0]).toMatchObject({ type: 'string', format: 'uuid' });
    }
  });

  it('broadcasts carry every seed field, audience_id beside segment_id', () => {
    const broadcast = spec.components.schemas.Broadcast;
    const seedFields = ['object', 'id', 'name', 'audience_id', 'segment_id', 'from', 'subject', 'reply_to', 'preview_text',
      'html', 'text', 'status', 'created_at', 'scheduled_at', 'sent_at', 'topic_id'];
    expect([...broadcast.required].sort()).toEqual([...seedFields].sort());
    expect(spec.components.schemas.BroadcastStatus.enum).toEqual(['draft', 'scheduled', 'queued', 'sent', 'canceled']);
  });
});
