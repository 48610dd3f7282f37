// Auth and every error path: the documented status and {statusCode, message, name} body.
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { Router } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, TEST_KEY, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';
import { errorAnswer, rawExchange } from './faults.ts';

const WRONG_SHAPE = '00000000-0000-4000-8000-00000000bad0';
const THROWS = '00000000-0000-4000-8000-00000000dead';

/** Planted ahead of the real handlers: one answers outside the contract, one fails with a secret. */
const saboteur = Router().get('/broadcasts/:broadcast_id', (req, res, next) => {
  if (req.params.broadcast_id === WRONG_SHAPE) return void res.json({ object: 'broadcast', id: WRONG_SHAPE, audienceId: 'x' } as never);
  if (req.params.broadcast_id === THROWS) throw new Error('connection to 10.0.0.7 failed: password=hunter2');
  next();
});

const errorBody = (statusCode: number, name: string) => ({ statusCode, name, message: expect.any(String) });

describe.each(backends)('errors on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { bodyLimit: '10kb' }, extraRoutes: saboteur });
  });
  afterAll(() => server.close());

  const call = async (path: string, init?: RequestInit) => {
    const res = await server.request(path, init);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    return { status: res.status, body: await res.json(), headers: res.headers };
  };

  describe('auth', () => {
    it('answers 401 missing_api_key without a bearer key', async () => {
      for (const authorization of ['', 'Basic dXNlcjpwYXNz', 'Bearer']) {
        const res = await fetch(`${server.url}/contacts?limit=1`, { headers: authorization ? { authorization } : {} });
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual(errorBody(401, 'missing_api_key'));
      }
    });

    it('answers 403 invalid_api_key for an unknown key', async () => {
      const res = await call('/contacts?limit=1', { headers: { authorization: 'Bearer re_unknownunknownunknownunknown1234' } });
      expect(res).toMatchObject({ status: 403, body: errorBody(403, 'invalid_api_key') });
    });

    it('answers 403 for an Authorization header given twice, even when the first holds a good key', async () => {
      const answer = await new Promise<{ status: number; body: unknown }>((resolve, reject) => {
        const req = request(`${server.url}/contacts?limit=1`, { headers: ['host', new URL(server.url).host, 'authorization', `Bearer ${server.apiKey}`, 'Authorization', 'Bearer re_someoneelse0000000000000000000000'] }, (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        });
        req.on('error', reject).end();
      });
      expect(answer).toEqual({ status: 403, body: { statusCode: 403, name: 'invalid_api_key', message: 'The Authorization header is given more than once: give the API key once.' } });
    });

    it('answers 403 for a revoked key that worked before', async () => {
      const { id, key } = await createKey(server.store, 'to revoke', 'full_access');
      const before = await call('/contacts?limit=1', { headers: { authorization: `Bearer ${key}` } });
      expect(before.status).toBe(200);
      expect(await server.store.apiKeys.revoke(id, new Date().toISOString())).toBe(true);
      const after = await call('/contacts?limit=1', { headers: { authorization: `Bearer ${key}` } });
      expect(after).toMatchObject({ status: 403, body: errorBody(403, 'invalid_api_key') });
    });

    it('answers 401 restricted_api_key when a sending_access key reads contacts or broadcasts', async () => {
      const { key } = await createKey(server.store, 'sender', 'sending_access');
      for (const path of ['/contacts?limit=1', `/broadcasts/${randomUUID()}`]) {
        const res = await call(path, { headers: { authorization: `Bearer ${key}` } });
        expect(res).toMatchObject({ status: 401, body: errorBody(401, 'restricted_api_key') });
      }
    });

    it('judges the key before the body: a malformed body gets 401 or 403 without a valid key, 400 with one', async () => {
      const { key: sender } = await createKey(server.store, 'sender of bad bodies', 'sending_access');
      const bad = { method: 'POST', body: '{"email": ', headers: { 'content-type': 'application/json' } };
      const as = (authorization: string) => call('/contacts', { ...bad, headers: { ...bad.headers, authorization } });
      const anonymous = await fetch(`${server.url}/contacts`, bad);
      expect({ status: anonymous.status, body: await anonymous.json() }).toMatchObject({ status: 401, body: errorBody(401, 'missing_api_key') });
      expect(await as('Bearer re_unknownunknownunknownunknown1234')).toMatchObject({ status: 403, body: errorBody(403, 'invalid_api_key') });
      expect(await as(`Bearer ${sender}`)).toMatchObject({ status: 401, body: errorBody(401, 'restricted_api_key') });
      expect(await as(`Bearer ${TEST_KEY}`)).toMatchObject({ status: 400, body: errorBody(400, 'invalid_json') });
      // Nor is a body judged on a path the contract lacks.
      expect(await call('/no-such-path', bad)).toMatchObject({ status: 404, body: errorBody(404, 'not_found') });
    });

    it('lets the health check through without a key', async () => {
      const res = await fetch(`${server.url}/health`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'ok' });
    });
  });

  describe('requests the server cannot take', () => {
    const post = (body: string, contentType = 'application/json') =>
      call('/contacts', { method: 'POST', headers: { 'content-type': contentType }, body });

    it('answers 400 invalid_json for malformed JSON', async () => {
      expect(await post('{"email": ')).toMatchObject({ status: 400, body: errorBody(400, 'invalid_json') });
    });

    it('ignores whatever body comes with an operation that takes none, malformed JSON too, as its contract declares no 400', async () => {
      const { data: template } = await server.client.POST('/templates', { body: { name: 'Body ignored', html: '<p>Hi</p>' } });
      const publish = await call(`/templates/${template!.id}/publish`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a": ' });
      expect(publish).toMatchObject({ status: 200, body: { object: 'template', id: template!.id } });
      const cancel = await call('/emails/4c2e7a3f-1b9d-4e8a-9f6b-2d7c8e1a5b30/cancel', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[[[' });
      expect(cancel).toMatchObject({ status: 404, body: errorBody(404, 'not_found') });
    });

    it('answers 413 payload_too_large over the body limit', async () => {
      const res = await post(JSON.stringify({ email: 'a@b.dev', first_name: 'x'.repeat(20_000) }));
      expect(res).toMatchObject({ status: 413, body: errorBody(413, 'payload_too_large') });
    });

    const oversized = (length: number) => `POST /contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    const tooLarge = { status: 413, body: { statusCode: 413, name: 'payload_too_large', message: 'The body is larger than 10240 bytes.' } };

    it('answers 413 at once when the Content-Length is over the limit, and closes the connection once the promised body stops coming', async () => {
      const started = Date.now();
      const said = await rawExchange(server.url, `${oversized(20_000)}{}`);
      expect(errorAnswer(said)).toEqual(tooLarge);
      // Closed after the keep-alive timeout's quiet (5 s here), not held until the request timeout.
      expect(Date.now() - started).toBeLessThan(server.config.keepAliveTimeoutMs + 3000);
    });

    it('answers a request before refusing malformed bytes that follow it in the same packet', async () => {
      const email = `pipelined-${randomUUID()}@example.com`;
      const body = JSON.stringify({ email });
      const said = await rawExchange(
        server.url,
        `POST /contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}GARBAGE\r\n\r\n`,
      );
      const [first, second] = said.split(/(?=HTTP\/1\.1 )/);
      expect(first).toMatch(/^HTTP\/1\.1 201 /);
      const created = JSON.parse(first!.split('\r\n\r\n')[1]!) as { id: string };
      expect((await call(`/contacts/${created.id}`)).body).toMatchObject({ email });
      expect(errorAnswer(second!)).toMatchObject({ status: 400, body: { name: 'validation_error' } });
    });

    it('lets a client still sending an oversized body read its 413, and keeps the connection for the next request', async () => {
      const { hostname, port } = new URL(server.url);
      const socket = connect(Number(port), hostname);
      let received = '';
      let error: Error | undefined;
      socket.on('data', (chunk) => (received += chunk));
      socket.on('error', (e) => (error = e));
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(oversized(60_000));
      // The answer comes before the body is sent; the body then keeps coming, as a client that does not read meanwhile would send it.
      for (let sent = 0; sent < 60_000; sent += 15_000) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        socket.write('x'.repeat(15_000));
      }
      /** Whether `received` holds a whole answer: its head, and as much body as its Content-Length says. */
      const whole = () => {
        const at = received.indexOf('\r\n\r\n');
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(received.slice(0, at))?.[1] ?? 0);
        return at >= 0 && Buffer.byteLength(received.slice(at + 4)) >= length;
      };
      await until(whole, () => `a whole answer, not ${JSON.stringify(received)}`);
      expect(errorAnswer(received)).toEqual(tooLarge);
      received = '';
      socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      await until(whole, () => `a whole answer to the next request, not ${JSON.stringify(received)}`);
      expect(received).toMatch(/^HTTP\/1\.1 200 /);
      expect(error).toBeUndefined();
      socket.destroy();
    });

    it('answers 415 unsupported_media_type for a body that is not JSON', async () => {
      expect(await post('email=a@b.dev', 'application/x-www-form-urlencoded')).toMatchObject({ status: 415, body: errorBody(415, 'unsupported_media_type') });
    });

    it('answers 404 not_found for an unknown route', async () => {
      expect(await call('/inboxes')).toMatchObject({ status: 404, body: errorBody(404, 'not_found') });
    });

    it('answers 405 method_not_allowed with Allow for a method the path lacks', async () => {
      const res = await call('/contacts', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(res).toMatchObject({ status: 405, body: errorBody(405, 'method_not_allowed') });
      expect(res.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'HEAD', 'POST']);
    });

    it('answers HEAD as the GET would be answered, without the body, and logs it as HEAD', async () => {
      for (const path of ['/health', '/contacts?limit=2']) {
        const get = await server.request(path);
        const head = await server.request(path, { method: 'HEAD', headers: { 'x-request-id': `head ${path}` } });
        expect({ status: head.status, type: head.headers.get('content-type'), length: head.headers.get('content-length'), body: await head.text() }).toEqual({
          status: 200,
          type: get.headers.get('content-type'),
          length: String(Buffer.byteLength(await get.text())),
          body: '',
        });
        await expect.poll(() => server.logs).toContainEqual(expect.objectContaining({ reqId: `head ${path}`, method: 'HEAD', status: 200 }));
      }
      const unknown = await fetch(`${server.url}/contacts?limit=1`, { method: 'HEAD' });
      expect(unknown.status).toBe(401);
      expect((await server.request('/emails/batch', { method: 'HEAD' })).status).toBe(405);
    });

    it('answers 422 for an unknown query parameter', async () => {
      expect(await call('/contacts?limit=1&page=2')).toMatchObject({ status: 422, body: { message: 'Unknown query parameter `page`.' } });
    });

    it('answers 422 invalid_parameter, naming the fault, for a path whose percent-encoding is broken', async () => {
      for (const path of ['/contacts/%ZZ', '/suppressions/a%E0%A4%A', '/emails/%']) {
        expect(await call(path)).toEqual({ status: 422, body: { statusCode: 422, name: 'invalid_parameter', message: 'The path is not percent-encoded correctly (a % must be followed by two hexadecimal digits, encoding UTF-8).' }, headers: expect.anything() });
      }
    });

    it('answers requests Node cannot parse in the error format too: 431 over its header limit, 400 when malformed', async () => {
      const longUrl = `GET /contacts?after=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
      expect(errorAnswer(await rawExchange(server.url, longUrl))).toEqual({ status: 431, body: { statusCode: 431, name: 'payload_too_large', message: 'The request line and headers come to more than 16 KB, which is more than the server reads.' } });
      for (const malformed of ['HELLO\r\n\r\n', 'GET /health HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n', 'POST /contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n']) {
        expect(errorAnswer(await rawExchange(server.url, malformed)), JSON.stringify(malformed)).toEqual({ status: 400, body: errorBody(400, 'validation_error') });
      }
    });

    it('answers a request over the header limit with 431 on a connection that has answered others before', async () => {
      const { hostname, port } = new URL(server.url);
      const said = await new Promise<string>((resolve, reject) => {
        let received = '';
        let asked = 0;
        const socket = connect(Number(port), hostname, () => socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'));
        socket.on('data', (chunk) => {
          received += chunk;
          // Its first answer read whole, the same connection carries the oversized request.
          if (asked++ === 0) socket.write(`GET /contacts?after=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
        });
        socket.on('close', () => resolve(received));
        socket.on('error', reject);
      });
      const [first, second] = said.split(/(?=HTTP\/1\.1 )/);
      expect(first).toMatch(/^HTTP\/1\.1 200 /);
      expect(errorAnswer(second ?? '')).toMatchObject({ status: 431, body: { name: 'payload_too_large' } });
    });

    it('answers an HTTP/1.1 request without Host with 400, and an Expect other than 100-continue with 417, in the error format', async () => {
      expect(errorAnswer(await rawExchange(server.url, 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n'))).toEqual({
        status: 400,
        body: { statusCode: 400, name: 'validation_error', message: 'The request has no Host header, which HTTP/1.1 requires.' },
      });
      const expecting = `POST /contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}`;
      expect(errorAnswer(await rawExchange(server.url, expecting))).toEqual({ status: 417, body: errorBody(417, 'validation_error') });
      // HTTP/1.0 has no Host requirement.
      expect(await rawExchange(server.url, 'GET /health HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    });

    it('reads a target in absolute form as its path, answers OPTIONS *, and refuses other targets and CONNECT in the error format', async () => {
      const absolute = await rawExchange(server.url, `GET http://mail.example/contacts?limit=1 HTTP/1.1\r\nHost: mail.example\r\nAuthorization: Bearer ${TEST_KEY}\r\nConnection: close\r\n\r\n`);
      expect(absolute).toMatch(/^HTTP\/1\.1 200 /);
      expect(absolute).toContain('"object":"list"');
      for (const method of ['GET', 'POST', 'DELETE']) {
        expect(errorAnswer(await rawExchange(server.url, `${method} * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)), method).toEqual({
          status: 400,
          body: { statusCode: 400, name: 'validation_error', message: 'The request target must be a path, such as `/contacts`.' },
        });
      }
      expect(await rawExchange(server.url, 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).toMatch(/^HTTP\/1\.1 204 [^]*\r\nallow: GET, HEAD, POST, PATCH, DELETE, OPTIONS\r\n/i);
      expect(errorAnswer(await rawExchange(server.url, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'))).toEqual({ status: 405, body: errorBody(405, 'method_not_allowed') });
    });

    it('takes what the resend SDK sends: Content-Type: application/json on GETs and on empty-bodied requests', async () => {
      const get = await call('/contacts?limit=1', { headers: { 'content-type': 'application/json' } });
      expect(get.status).toBe(200);
      const { data: ref } = await server.client.POST('/contacts', { body: { email: 'empty-body@example.com' } });
      const del = await call(`/contacts/${ref!.id}`, { method: 'DELETE', headers: { 'content-type': 'application/json' } });
      expect(del).toMatchObject({ status: 200, body: { deleted: true } });
    });
  });

  describe('server faults', () => {
    it('answers 500 with nothing of the fault in the body, and logs it', async () => {
      const res = await call(`/broadcasts/${THROWS}`);
      expect(res).toEqual({ status: 500, headers: expect.anything(), body: { statusCode: 500, name: 'internal_server_error', message: 'An unexpected error occurred.' } });
      expect(JSON.stringify(res.body)).not.toMatch(/hunter2|10\.0\.0\.7|at /);
      const logged = server.logs.find((line) => line.level === 50 && line.err?.message?.includes('hunter2'));
      expect(logged?.err.stack).toContain('errors.test.ts');
    });

    it('response validation is live: a body outside the contract becomes a logged 500, not a silent pass', async () => {
      const res = await call(`/broadcasts/${WRONG_SHAPE}`);
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ statusCode: 500, name: 'internal_server_error', message: 'An unexpected error occurred.' });
      const logged = server.logs.find((line) => line.level === 50 && JSON.stringify(line.validation ?? '').includes('/response'));
      expect(logged, 'a logged response validation error').toBeDefined();
    });

    it('logs each request as one JSON line with its request id', async () => {
      const res = await server.request('/health', { headers: { 'x-request-id': 'trace-me-123' } });
      expect(res.headers.get('x-request-id')).toBe('trace-me-123');
      await expect.poll(() => server.logs).toContainEqual(expect.objectContaining({ reqId: 'trace-me-123', method: 'GET', url: '/health', status: 200 }));
    });

    it('logs no link token however its path is spelled, and no query value named as a secret', async () => {
      const secrets = ['TOKENupper0000000000000000000000', 'TOKENencoded00000000000000000000', 'TOKENattach00000000000000000000', 're_querysecret00000000000000000'];
      await server.request(`/Unsubscribe/${secrets[0]}`);
      await server.request(`/%75nsubscribe/${secrets[1]}?x=1`);
      await server.request(`//attachments/${secrets[2]}`);
      await server.request(`/contacts?api_key=${secrets[3]}&limit=1`);
      // The last request's line logged, the lines of those before it are too.
      await expect.poll(() => server.logs).toContainEqual(expect.objectContaining({ url: '/contacts?api_key=…&limit=1' }));
      expect(server.logs).toContainEqual(expect.objectContaining({ url: '/%75nsubscribe/…' }));
      const logged = JSON.stringify(server.logs);
      for (const secret of secrets) expect(logged).not.toContain(secret);
    });

    it('keeps a request id only when it is at most 200 printable characters; otherwise it makes one', async () => {
      for (const given of ['x'.repeat(201), 'caf\u00e9-id']) {
        const res = await server.request('/health', { headers: { 'x-request-id': given } });
        expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      }
      const longest = 'y'.repeat(200);
      expect((await server.request('/health', { headers: { 'x-request-id': longest } })).headers.get('x-request-id')).toBe(longest);
      // The last request's line logged, the lines of those before it are too.
      await expect.poll(() => server.logs).toContainEqual(expect.objectContaining({ reqId: longest }));
      expect(server.logs.some((line) => String(line.reqId ?? '').length > 200)).toBe(false);
    });
  });
});
