// Rate limiting per API key, as Resend does it: RateLimit-* headers on every response once the key is
// known, 429 rate_limit_exceeded with Retry-After over the limit, one limit shared by every process on
// one PostgreSQL database, and no request refused or held because the counters cannot be reached.
//
// A window is one second from the first request counted in it. A burst whose last answer comes back
// within a second of its first request was counted in one window; a slower burst proves nothing about
// a window and is sent again (a bounded number of times).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Resend } from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import { backends, postgresSchema } from '../support/backends.ts';
import { startTestServer, TEST_KEY, type TestServer } from '../support/server.ts';

const LIMIT = 3;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Long enough for any window opened by earlier requests to have closed. */
const nextWindow = () => sleep(1100);

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

const get = (url: string, key: string | undefined, signal?: AbortSignal): Promise<Answer> =>
  fetch(url, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal }).then(async (res) => ({ status: res.status, headers: res.headers, body: await res.json() }));

/** Sends the requests at once, in a fresh window; retries until one window held them all. */
async function inOneWindow<T>(send: () => Promise<T>[]): Promise<T[]> {
  for (let attempt = 0; attempt < 8; attempt++) {
    await nextWindow();
    const started = performance.now();
    const answers = await Promise.all(send());
    if (performance.now() - started < 1000) return answers;
  }
  throw new Error('no burst of requests was answered within one window of one second');
}

const header = (answer: Answer, name: string) => answer.headers.get(name);
/** How many requests the server at `url` has rate-limited by its own count, the shared counters being late. */
const localCounts = async (url: string) => Number(/^mailroom_rate_limit_local_counts_total (\d+)$/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1]);
const allowed = (answers: Answer[]) => answers.filter((a) => a.status === 200);

describe.each(backends)('rate limiting on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { rateLimitPerSecond: LIMIT } });
  });
  afterAll(() => server.close());
  const contacts = (key: string | undefined = TEST_KEY, signal?: AbortSignal) => get(`${server.url}/contacts?limit=1`, key, signal);

  it('allows the limit per window, then answers 429 rate_limit_exceeded with Retry-After, and says where the key stands', async () => {
    const answers = await inOneWindow(() => Array.from({ length: LIMIT + 2 }, () => contacts()));
    const ok = allowed(answers);
    const refused = answers.filter((a) => a.status === 429);
    expect(ok).toHaveLength(LIMIT);
    expect(refused).toHaveLength(2);
    expect(ok.map((a) => header(a, 'ratelimit-remaining')).sort()).toEqual(['0', '1', '2']);
    for (const answer of answers) {
      expect(header(answer, 'ratelimit-limit')).toBe(String(LIMIT));
      expect(header(answer, 'ratelimit-reset')).toMatch(/^[01]$/);
    }
    for (const answer of refused) {
      expect(answer.body).toEqual({ statusCode: 429, name: 'rate_limit_exceeded', message: `Too many requests. You can only make ${LIMIT} requests per second.` });
      expect(header(answer, 'retry-after')).toBe('1');
      expect(header(answer, 'ratelimit-remaining')).toBe('0');
    }
  });

  it('sends the headers on errors too once the key is known, and counts those requests', async () => {
    const sender = await createKey(server.store, 'sender', 'sending_access');
    const [missing, unknown, restricted, invalid] = await inOneWindow(() => [
      get(`${server.url}/contacts/00000000-0000-4000-8000-000000000000`, TEST_KEY),
      get(`${server.url}/contacts?limit=1`, 're_not_a_real_key_000000000000000000'),
      get(`${server.url}/contacts?limit=1`, sender.key),
      get(`${server.url}/contacts?limit=0`, TEST_KEY),
    ]);
    expect(missing!.status).toBe(404);
    expect(invalid!.status).toBe(422);
    expect(restricted).toMatchObject({ status: 401, body: { name: 'restricted_api_key' } });
    for (const answer of [missing!, invalid!, restricted!]) expect(header(answer, 'ratelimit-limit')).toBe(String(LIMIT));
    // Two of the test key's three requests in this window are spent on its errors.
    expect([header(missing!, 'ratelimit-remaining'), header(invalid!, 'ratelimit-remaining')].sort()).toEqual(['1', '2']);
    // An unknown key is refused before any limit applies to it.
    expect(unknown).toMatchObject({ status: 403, body: { name: 'invalid_api_key' } });
    expect(header(unknown!, 'ratelimit-limit')).toBeNull();
  });

  it('gives each API key its own limit', async () => {
    const other = await createKey(server.store, 'other', 'full_access');
    const answers = await inOneWindow(() => [...Array.from({ length: LIMIT + 1 }, () => contacts()), contacts(other.key)]);
    expect(allowed(answers.slice(0, LIMIT + 1))).toHaveLength(LIMIT);
    expect(answers[LIMIT + 1]!.status).toBe(200);
    expect(header(answers[LIMIT + 1]!, 'ratelimit-remaining')).toBe(String(LIMIT - 1));
  });

  it('is reported by the resend SDK as rate_limit_exceeded', async () => {
    const resend = new Resend(TEST_KEY, { baseUrl: server.url });
    const results = await inOneWindow(() => Array.from({ length: LIMIT + 1 }, () => resend.contacts.list()));
    const refused = results.filter((r) => r.error);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.error).toMatchObject({ name: 'rate_limit_exceeded', statusCode: 429 });
    expect(refused[0]!.headers?.['retry-after']).toBe('1');
  });

  it.runIf(backend === 'postgres')('keeps answering when its counters in the database cannot be reached, counting in the process meanwhile', async () => {
    const session = new pg.Client({ connectionString: server.config.databaseUrl, application_name: 'mailroom rate limit test' });
    await session.connect();
    try {
      // A table no one can read stands for a database that does not answer; a missing one, for errors.
      await session.query('begin');
      await session.query('lock table rate_limits in access exclusive mode');
      await nextWindow();
      const held = await contacts(TEST_KEY, AbortSignal.timeout(20_000)); // bounded, so that a hang fails cleanly
      expect(held.status).toBe(200);
      expect(header(held, 'ratelimit-remaining')).toBe(String(LIMIT - 1));
      expect(await localCounts(server.url)).toBeGreaterThanOrEqual(1);
      await session.query('rollback');

      await session.query('alter table rate_limits rename to rate_limits_away');
      const answers = await inOneWindow(() => Array.from({ length: LIMIT + 1 }, () => contacts()));
      expect(allowed(answers)).toHaveLength(LIMIT); // the process still counts
      expect(server.logs.filter((l) => l.msg?.startsWith('rate limit counters in the database are unavailable'))).toHaveLength(1);
    } finally {
      await session.query('rollback').catch(() => {});
      await session.query('alter table if exists rate_limits_away rename to rate_limits');
      await session.end();
    }
  });
});

describe.runIf(backends.includes('postgres'))('rate limiting: one limit shared by two processes on PostgreSQL', () => {
  const PER_SECOND = 10;
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-rate-'));
  let schema: Awaited<ReturnType<typeof postgresSchema>>;
  const children: ChildProcess[] = [];
  const urls: string[] = [];

  function start(): Promise<string> {
    const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: schema.url, PORT: '0', MAILROOM_API_KEY: TEST_KEY, DELIVERY_WORKER: 'off', RATE_LIMIT_PER_SECOND: String(PER_SECOND), LOG_LEVEL: 'info', METRICS: 'on' };
    const child = spawn(process.execPath, ['build/main.js'], { cwd: new URL('../..', import.meta.url).pathname, env, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    return new Promise((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (chunk) => {
        out += chunk;
        const url = /"url":"([^"]+)".*Mailroom is listening/.exec(out)?.[1];
        if (url) resolve(url);
      });
      child.on('exit', (code) => reject(new Error(`exited ${code} before listening`)));
    });
  }

  beforeAll(async () => {
    schema = await postgresSchema();
    urls.push(await start(), await start());
  });
  afterAll(async () => {
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : (child.once('exit', resolve), child.kill('SIGTERM'))))));
    await schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(`together allow ${PER_SECOND} requests per window to one key`, { timeout: 120_000 }, async () => {
    const counts: number[] = [];
    const countedApart = () => Promise.all(urls.map(localCounts)).then((each) => each.reduce((sum, n) => sum + n, 0));
    let late = 0;
    for (let round = 0; round < 3; round++) {
      const before = await countedApart();
      // 25 requests to each process at once: 50 in one window, of which the limit must let 10 through.
      const answers = await inOneWindow(() => urls.flatMap((url) => Array.from({ length: 25 }, () => get(`${url}/contacts?limit=1`, TEST_KEY))));
      expect(answers.filter((a) => a.status !== 200 && a.status !== 429)).toEqual([]);
      // A request the database did not count within 0.5 s (a busy machine) was counted by its process
      // alone, as designed: such a burst proves nothing about the shared limit and is sent again.
      if ((await countedApart()) > before) {
        expect(++late, 'bursts counted apart, the database being late').toBeLessThan(5);
        round--;
        continue;
      }
      counts.push(allowed(answers).length);
      expect(allowed(answers).map((a) => header(a, 'ratelimit-remaining')).sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: PER_SECOND }, (_, i) => String(i)));
    }
    console.log(`shared rate limit: allowed per window of 50 requests over two processes: ${counts.join(', ')} (limit ${PER_SECOND}); ${late} burst(s) sent again, counted apart`);
    expect(counts).toEqual([PER_SECOND, PER_SECOND, PER_SECOND]);
  });
});

describe.runIf(backends.includes('postgres'))('rate limiting: a counter row held locked on PostgreSQL', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('postgres', { config: { rateLimitPerSecond: 1000, databaseConnectTimeoutMs: 1000 } });
  });
  afterAll(() => server.close());

  it("serves every request, this key's counted in the process, other keys' alike, rather than wait for connections", async () => {
    expect((await server.request('/contacts?limit=1')).status).toBe(200);
    const { key: other } = await createKey(server.store, 'other', 'full_access');
    // Another session holds the key's counter row, as a stuck process might.
    const locker = new pg.Client({ connectionString: server.config.databaseUrl });
    await locker.connect();
    await locker.query('begin');
    expect((await locker.query('select key from rate_limits for update')).rowCount).toBe(1);
    try {
      const answers = await Promise.all([
        ...Array.from({ length: 16 }, () => server.request('/contacts?limit=1')),
        ...Array.from({ length: 8 }, () => server.request('/contacts?limit=1', { headers: { authorization: `Bearer ${other}` } })),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual(Array(24).fill(200));
    } finally {
      await locker.query('rollback');
      await locker.end();
    }
  });
});
