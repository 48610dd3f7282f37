// CORS_ORIGINS: browsers on the listed origins may call the API (preflights answered, rate-limit headers
// readable); other origins get no CORS header; with it unset, no response carries any.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const PAGE = 'http://127.0.0.1:5173';
const OTHER = 'http://evil.example';

const preflight = (server: TestServer, origin: string, path = '/emails/batch', method = 'POST') =>
  fetch(server.url + path, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type,idempotency-key,x-batch-validation' },
  });

const corsHeaders = (res: Response) => [...res.headers.keys()].filter((name) => name.startsWith('access-control-'));
const list = (value: string | null) => (value ?? '').split(',').map((item) => item.trim().toLowerCase());

describe.each(backends)('CORS on %s', (backend) => {
  describe('with CORS_ORIGINS listing the page', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(backend, { config: { corsOrigins: [PAGE], rateLimitPerSecond: 100 } });
    });
    afterAll(() => server?.close());

    it('answers a preflight from the listed origin with 204 and what the page may send', async () => {
      const res = await preflight(server, PAGE);
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(PAGE);
      expect(list(res.headers.get('access-control-allow-methods'))).toEqual(expect.arrayContaining(['get', 'head', 'post', 'patch', 'delete']));
      expect(list(res.headers.get('access-control-allow-headers'))).toEqual(
        expect.arrayContaining(['authorization', 'content-type', 'idempotency-key', 'x-batch-validation', 'user-agent']),
      );
      expect(Number(res.headers.get('access-control-max-age'))).toBeGreaterThan(0);
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
      expect(list(res.headers.get('vary'))).toContain('origin');
    });

    it('answers preflights for paths with parameters too', async () => {
      const res = await preflight(server, PAGE, '/contacts/559ac32e-9ef5-46fb-82a1-b76b840c0f7b', 'PATCH');
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(PAGE);
    });

    it('gives another origin no CORS headers, on a preflight or a request', async () => {
      const res = await preflight(server, OTHER);
      expect(res.status).toBe(204);
      expect(corsHeaders(res)).toEqual([]);
      const actual = await server.request('/contacts?limit=1', { headers: { origin: OTHER } });
      expect(actual.status).toBe(200);
      expect(corsHeaders(actual)).toEqual([]);
      expect(list(actual.headers.get('vary'))).toContain('origin');
    });

    it('lets the page read the response and its rate-limit headers', async () => {
      const res = await server.request('/contacts?limit=1', { headers: { origin: PAGE } });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe(PAGE);
      expect(list(res.headers.get('access-control-expose-headers'))).toEqual(
        expect.arrayContaining(['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after', 'x-request-id']),
      );
      expect(res.headers.get('ratelimit-limit')).toBe('100');
    });

    it('carries CORS headers on errors as well, so the page can read them', async () => {
      const res = await fetch(`${server.url}/contacts`, { headers: { origin: PAGE } });
      expect(res.status).toBe(401);
      expect(res.headers.get('access-control-allow-origin')).toBe(PAGE);
      expect(await res.json()).toMatchObject({ statusCode: 401, name: 'missing_api_key' });
    });
  });

  describe('with CORS_ORIGINS=*', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(backend, { config: { corsOrigins: ['*'] } });
    });
    afterAll(() => server?.close());

    it('allows any origin, without credentials', async () => {
      const res = await preflight(server, OTHER);
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      const actual = await server.request('/contacts?limit=1', { headers: { origin: OTHER } });
      expect(actual.headers.get('access-control-allow-origin')).toBe('*');
    });
  });

  describe('with CORS_ORIGINS unset', () => {
    let server: TestServer;
    beforeAll(async () => {
      server = await startTestServer(backend);
    });
    afterAll(() => server?.close());

    it('sends no CORS header at all', async () => {
      const res = await preflight(server, PAGE);
      expect(corsHeaders(res)).toEqual([]);
      const actual = await server.request('/contacts?limit=1', { headers: { origin: PAGE } });
      expect(actual.status).toBe(200);
      expect(corsHeaders(actual)).toEqual([]);
    });
  });
});

it('refuses to start with an entry that is not an origin', async () => {
  await expect(startTestServer('sqlite', { config: { corsOrigins: ['https://app.example.com/'] } })).rejects.toThrow(/CORS_ORIGINS: "https:\/\/app.example.com\/" is not an origin/);
});

it('reads CORS_ORIGINS as a comma-separated list, and METRICS=off', () => {
  expect(loadConfig({ CORS_ORIGINS: ' https://app.example.com, http://127.0.0.1:5173 ,' }).corsOrigins).toEqual(['https://app.example.com', 'http://127.0.0.1:5173']);
  expect(loadConfig({}).corsOrigins).toEqual([]);
  expect(loadConfig({}).metrics).toBe(true);
  expect(loadConfig({ METRICS: 'off' }).metrics).toBe(false);
});
