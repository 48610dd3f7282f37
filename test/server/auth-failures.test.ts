// Failed authentication limited per client address (AUTH_FAILURES_PER_MINUTE): a client that keeps
// sending a wrong key, or none, is answered 429 rate_limit_exceeded with Retry-After once its address
// is past the budget, while good keys from the same address, and other addresses, go on as before.
// Loopback has a whole /8: 127.0.0.2 and 127.0.0.3 stand for other clients.
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientOf } from '../../server/http/rateLimit.ts';
import { backends, postgresSchema } from '../support/backends.ts';
import { startServerProcess, type ServerProcess } from '../support/process.ts';
import { startTestServer, TEST_KEY, type TestServer } from '../support/server.ts';

const BUDGET = 5;
const WRONG_KEY = 're_wrongwrongwrongwrongwrongwrong00';

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: any;
}

/** GET `path` from the local address `from`, with `key` as the bearer key (none when undefined). */
function get(url: string, path: string, key: string | undefined, from = '127.0.0.1'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { localAddress: from, agent: false, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] as string | undefined, body: JSON.parse(text) }));
    });
    req.on('error', reject).end();
  });
}

const refusedForFailures = {
  statusCode: 429,
  name: 'rate_limit_exceeded',
  message: expect.stringMatching(new RegExp(`^Too many requests without a valid API key from this address: more than ${BUDGET} a minute\\. Try again in \\d+ seconds\\.$`)),
};

describe.each(backends)('failed authentication per client address on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { authFailuresPerMinute: BUDGET } });
  });
  afterAll(() => server.close());
  const contacts = (key: string | undefined, from?: string) => get(server.url, '/contacts?limit=1', key, from);

  it('answers failures as they are up to the budget, then 429 with Retry-After, and never refuses a good key from that address', async () => {
    // One at a time: on PostgreSQL a burst the database answers late is counted in the process too.
    const first: Answer[] = [];
    for (let i = 0; i < BUDGET; i++) first.push(await contacts(i % 2 ? undefined : WRONG_KEY));
    expect(first.map((answer) => answer.status).sort()).toEqual([...Array(Math.ceil(BUDGET / 2)).fill(403), ...Array(Math.floor(BUDGET / 2)).fill(401)].sort());
    for (const key of [WRONG_KEY, undefined, 're_another0wrong0key0000000000000000']) {
      const refused = await contacts(key);
      expect(refused).toMatchObject({ status: 429, body: refusedForFailures });
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(refused.retryAfter)).toBeLessThanOrEqual(60);
    }
    // Someone else at the same address (behind the same NAT) with a good key is served throughout.
    for (let i = 0; i < 3; i++) expect((await contacts(TEST_KEY)).status).toBe(200);
    expect((await server.request('/contacts', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'kept@example.com' }) })).status).toBe(201);
    // Another address has a budget of its own.
    expect(await contacts(WRONG_KEY, '127.0.0.2')).toMatchObject({ status: 403, body: { name: 'invalid_api_key' } });
  });

  it('holds a careless client retrying a wrong key in a loop to the budget', async () => {
    // One at a time: on PostgreSQL a burst the database answers late is counted in the process too.
    const answers: Answer[] = [];
    for (let i = 0; i < 200; i++) answers.push(await contacts(WRONG_KEY, '127.0.0.3'));
    expect(answers.slice(0, BUDGET).map((answer) => answer.status)).toEqual(Array(BUDGET).fill(403));
    expect(answers.filter((answer) => answer.status === 429)).toHaveLength(200 - BUDGET);
    expect((await contacts(TEST_KEY, '127.0.0.3')).status).toBe(200);
  });
});

describe('the default budget', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
  });
  afterAll(() => server.close());

  it('is reached by a client retrying a wrong key in a loop, and counts only failures', async () => {
    expect(server.config.authFailuresPerMinute).toBe(30);
    for (let i = 0; i < 100; i++) expect((await get(server.url, '/contacts?limit=1', TEST_KEY)).status).toBe(200);
    const started = performance.now();
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await get(server.url, '/contacts?limit=1', WRONG_KEY)).status);
    expect(statuses).toEqual([...Array(30).fill(403), 429]);
    // Far faster than this on any machine: the budget is no obstacle to how quickly the client fails.
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe.runIf(backends.includes('postgres'))('failed authentication on PostgreSQL, across processes', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-auth-failures-'));
  let schema: Awaited<ReturnType<typeof postgresSchema>>;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    schema = await postgresSchema();
    const env = { DATA_DIR: dataDir, DATABASE_URL: schema.url, DELIVERY_WORKER: 'off', AUTH_FAILURES_PER_MINUTE: String(BUDGET) };
    servers.push(await startServerProcess(env));
    servers.push(await startServerProcess(env));
  });
  afterAll(async () => {
    for (const server of servers) server.child.kill('SIGTERM');
    await Promise.all(servers.map((server) => server.exited));
    await schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('counts an address against one budget, whichever process it reaches', async () => {
    // One at a time: the database answers each well within the half second the limit waits for it.
    const statuses: number[] = [];
    for (let i = 0; i < BUDGET + 2; i++) statuses.push((await get(servers[i % 2]!.url, '/contacts?limit=1', WRONG_KEY)).status);
    expect(statuses).toEqual([...Array(BUDGET).fill(403), 429, 429]);
    expect((await get(servers[0]!.url, '/contacts?limit=1', TEST_KEY)).status).toBe(200);
    expect((await get(servers[1]!.url, '/contacts?limit=1', TEST_KEY)).status).toBe(200);
  });
});

describe('the client address a budget belongs to', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff::', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    [undefined, 'unknown'],
  ])('reads %s as %s', (address, client) => {
    expect(clientOf(address)).toBe(client);
  });
});
