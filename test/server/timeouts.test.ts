// Peers that stall: clients that never finish their request or never read the response, and a database
// that keeps a statement waiting. None of them may hold the server, or other requests, for long.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, type Backend } from '../support/backends.ts';
import { startTestServer, TEST_KEY, withServer, type TestServer } from '../support/server.ts';
import { closedByServer, errorAnswer, eventually, listRequest, rawExchange, seedContacts, stalledReader } from './faults.ts';

describe.each(backends)('stalled clients on %s', (backend: Backend) => {
  // Only the stall timeout is short: the requests that must be served meanwhile arrive in time, however
  // busy the machine.
  const server = withServer(backend, { config: { streamStallTimeoutMs: 1000 } });
  beforeAll(() => seedContacts(server, 20_000));

  it('serves other requests while 12 clients stall on the unpaginated list, holding no database connection', async () => {
    const readers = await Promise.all(Array.from({ length: 12 }, () => stalledReader(server.url, listRequest())));
    try {
      for (let round = 0; round < 3; round++) {
        const page = await server.request('/contacts?limit=10');
        expect(page.status).toBe(200);
        expect((await page.json()).data).toHaveLength(10);
        expect((await server.request('/health')).status).toBe(200);
      }
    } finally {
      for (const reader of readers) reader.destroy();
    }
  });

  it('cuts off a streamed list whose client reads nothing for the stall timeout', async () => {
    const reader = await stalledReader(server.url, listRequest());
    await eventually(async () => server.logs.some((l) => l.msg?.includes('stopped reading')), 'the server cut the stalled client off', 200);
    const { received } = await closedByServer(reader);
    expect(received).toMatch(/^HTTP\/1.1 200/);
    expect(received.trimEnd().endsWith(']}')).toBe(false);
  });

  it('still streams the whole list to a client that reads', async () => {
    const res = await server.request('/contacts');
    expect((await res.json()).data).toHaveLength(20_000);
  });
});

describe.each(backends)('requests that never finish, on %s', (backend: Backend) => {
  const server = withServer(backend, { config: { headersTimeoutMs: 500, requestTimeoutMs: 800 } });

  it('closes a connection whose request headers never finish', async () => {
    const said = await rawExchange(server.url, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    expect(errorAnswer(said)).toEqual({ status: 408, body: { statusCode: 408, name: 'validation_error', message: 'The request did not arrive in the time the server allows: 0.5 s for its headers, 0.8 s for all of it.' } });
  });

  it('closes a connection whose request body never finishes', async () => {
    const head = `POST /contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`;
    const said = await rawExchange(server.url, `${head}{"email":`);
    expect(errorAnswer(said)).toMatchObject({ status: 408, body: { statusCode: 408, name: 'validation_error' } });
  });
});

describe.each(backends)('idle connections on %s', (backend: Backend) => {
  // Only the keep-alive timeout is short: the request before the idle time arrives in time, however busy the machine.
  const server = withServer(backend, { config: { keepAliveTimeoutMs: 300 } });

  it('closes an idle keep-alive connection', async () => {
    const said = await rawExchange(server.url, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    expect(said).toMatch(/^HTTP\/1.1 200/);
  });
});

describe.skipIf(!backends.includes('postgres'))('a statement that waits on PostgreSQL', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('postgres', { config: { databaseStatementTimeoutMs: 1000, databaseConnectTimeoutMs: 500 } });
  });
  afterAll(() => server.close());

  it('ends, and so does the wait for a pooled connection, while a row stays locked', async () => {
    const created = await server.request('/contacts', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'locked@example.com' }) });
    const { id } = await created.json();
    const locker = new pg.Client({ connectionString: server.config.databaseUrl });
    await locker.connect();
    try {
      await locker.query('begin');
      await locker.query('select id from contacts where id = $1 for update', [id]);
      // More updates than the pool has connections: ten wait on the row, the others on the pool.
      const statuses = await Promise.all(
        Array.from({ length: 12 }, (_, n) =>
          server.request(`/contacts/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ properties: { [`k${n}`]: 'v' } }) }).then((r) => r.status),
        ),
      );
      // All answered, as unavailable, while the row is still locked: none waited for the lock to go.
      expect(statuses.every((s) => s === 503)).toBe(true);
    } finally {
      await locker.query('rollback');
      await locker.end();
    }
    const res = await server.request(`/contacts/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ properties: { after: 'v' } }) });
    expect(res.status).toBe(200);
  });
});
