// One validation path: express-openapi-validator mounted whole, as its documentation shows, between
// the body parser and auth; what reaches it, what it refuses, and in which order, pinned.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import { FORMATS, loadSpec } from '../../server/contract.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const spec = loadSpec();

describe('one validation path: the formats', () => {
  it('every format the contract uses is one of those', () => {
    const used = new Set<string>();
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (typeof node !== 'object' || node === null) return;
      const { format, type } = node as { format?: unknown; type?: unknown };
      if (typeof format === 'string' && type !== undefined) used.add(format);
      Object.values(node).forEach(walk);
    };
    walk(spec);
    expect([...used].sort()).toEqual(['date-time', 'email', 'uri', 'uuid']);
    for (const format of used) expect(FORMATS).toHaveProperty([format]);
  });
});

const post = (target: TestServer, path: string, body: unknown, headers: Record<string, string> = {}) =>
  target.request(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }).then(async (res) => ({ status: res.status, body: await res.json() }));

describe.each(backends)('one validation path: auth, triage and checks in order on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  it('judges the key before the body: 401 without one, 403 for a bad one, 401 restricted for a sending key', async () => {
    const invalidBody = { nickname: 1 };
    expect(await post(server, '/contacts', invalidBody, { authorization: '' })).toMatchObject({ status: 401, body: { name: 'missing_api_key' } });
    expect(await post(server, '/contacts', invalidBody, { authorization: 'Bearer re_notakeynotakeynotakeynotakey00' })).toMatchObject({ status: 403, body: { name: 'invalid_api_key' } });
    const { key } = await createKey(server.store, 'sender', 'sending_access');
    expect(await post(server, '/contacts', invalidBody, { authorization: `Bearer ${key}` })).toMatchObject({ status: 401, body: { name: 'restricted_api_key' } });
    expect((await post(server, '/contacts', invalidBody)).status).toBe(422);
  });

  it('routes before auth: an unknown path is 404 and a wrong method 405 without a key', async () => {
    expect((await server.request('/inboxes', { headers: { authorization: '' } })).status).toBe(404);
    expect((await server.request('/contacts', { method: 'PUT', headers: { authorization: '' } })).status).toBe(405);
  });

  it('takes a trailing slash, an empty segment, or a letter in another case, as another path: `GET /emails/` (an SDK getting the id "") is no list, but 404', async () => {
    const paths = [
      ['GET', '/emails/'], ['GET', '/contacts/'], ['DELETE', '/contacts/'], ['GET', `/broadcasts/${randomUUID()}/`], ['GET', '/health/'], ['GET', '/Emails'], ['GET', '/CONTACTS'], ['HEAD', '/API-KEYS'],
      ['GET', `/broadcasts//${randomUUID()}`], ['POST', '/emails//batch'], ['GET', '/contacts//'],
    ];
    for (const [method, path] of paths) {
      if (method === 'HEAD') {
        expect((await server.request(path!, { method })).status).toBe(404);
        continue;
      }
      const res = await server.request(path!, { method });
      expect({ method, path, status: res.status, body: await res.json() }).toEqual({ method, path, status: 404, body: { statusCode: 404, name: 'not_found', message: `No route for ${method} ${path}.` } });
    }
    expect((await server.request('/emails')).status).toBe(200);
  });

  it('triages a batch before the whole-batch check: permissive mode sends the good email, strict names the bad one', async () => {
    const good = { from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'Hi' };
    const batch = [good, { to: 'b@example.com', subject: 'Hi', text: 'Hi', cc: 3 }];
    expect(await post(server, '/emails/batch', batch, { 'x-batch-validation': 'permissive' })).toEqual({
      status: 200,
      body: { data: [{ id: expect.any(String) }], errors: [{ index: 1, message: 'The `cc` must be one address, or a list of up to 50 (an empty list being none).' }] },
    });
    expect(await post(server, '/emails/batch', batch)).toMatchObject({ status: 422, body: { message: 'emails[1]: The `cc` must be one address, or a list of up to 50 (an empty list being none).' } });
  });
});

// Express 5 parses req.query anew on every read; the validator pins the object it coerces (its own
// Express 5 workaround), which is what keeps the handlers' numbers numbers.
describe('one validation path: handlers see the query as the request check coerced it', () => {
  let server: TestServer;
  const seen: unknown[] = [];
  beforeAll(async () => {
    const spy = express.Router().get('/contacts', (req, _res, next) => {
      seen.push(req.query.limit);
      next();
    });
    server = await startTestServer('sqlite', { extraRoutes: spy });
  });
  afterAll(() => server.close());

  it('reads limit=2 as the number 2', async () => {
    expect((await server.request('/contacts?limit=2')).status).toBe(200);
    expect(seen).toEqual([2]);
  });
});

// Wiring, not storage: on SQLite only.
describe('one validation path: responses from auth on are checked', () => {
  let broken: TestServer;
  let dir: string;
  beforeAll(async () => {
    // A contract whose 401 and batch result demand a field the server never sends: if those answers
    // pass through the response check, they turn into logged 500s.
    const strict: Record<string, any> = structuredClone(spec);
    const demandHint = (schema: object) => ({ allOf: [schema], required: ['hint'] });
    strict.components.responses.Unauthorized.content['application/json'].schema = demandHint({ $ref: '#/components/schemas/Error' });
    strict.components.schemas.BatchResult = demandHint(strict.components.schemas.BatchResult);
    dir = mkdtempSync(join(tmpdir(), 'mailroom-spec-'));
    writeFileSync(join(dir, 'openapi.json'), JSON.stringify(strict));
    broken = await startTestServer('sqlite', { spec: join(dir, 'openapi.json') });
  });
  afterAll(async () => {
    await broken?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('checks the responses of auth and of a triaged batch against the contract, and a failure is a JSON 500', async () => {
    const internal = { statusCode: 500, name: 'internal_server_error', message: 'An unexpected error occurred.' };
    expect(await post(broken, '/contacts', { email: 'a@example.com' }, { authorization: '' })).toEqual({ status: 500, body: internal });
    const good = { from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'Hi' };
    expect(await post(broken, '/emails/batch', [good, { to: 'nobody' }], { 'x-batch-validation': 'permissive' })).toEqual({ status: 500, body: internal });
    const failures = broken.logs.filter((line) => line.level === 50 && JSON.stringify(line.validation ?? '').includes('/response'));
    expect(failures).toHaveLength(2);
  });
});
