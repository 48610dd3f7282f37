// The database going away and coming back, and concurrent writers: PostgreSQL backends terminated under
// a live server, a database that stops answering, SQLite shared with the delivery thread, and
// read-modify-write updates racing each other.
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../server/store/index.ts';
import { failureLevel } from '../../server/store/database.ts';
import { reconnectingPool } from '../../server/store/reconnectingPool.ts';
import pg from 'pg';
import { backends, POSTGRES_URL, type Backend } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { eventually, namedSchema, postgresProxy, terminateBackends, backendCount } from './faults.ts';

const json = { 'content-type': 'application/json' };

async function createContact(server: TestServer, email: string): Promise<string> {
  const res = await server.request('/contacts', { method: 'POST', headers: json, body: JSON.stringify({ email }) });
  expect(res.status).toBe(201);
  return (await res.json()).id;
}

const patch = (server: TestServer, id: string, properties: Record<string, string>) =>
  server.request(`/contacts/${id}`, { method: 'PATCH', headers: json, body: JSON.stringify({ properties }) });

describe.skipIf(!backends.includes('postgres'))('PostgreSQL connections dropped under a live server', () => {
  let server: TestServer;
  let schema: Awaited<ReturnType<typeof namedSchema>>;
  beforeAll(async () => {
    schema = await namedSchema();
    server = await startTestServer('postgres', { config: { databaseUrl: schema.url } });
  });
  afterAll(async () => {
    await server.close();
    await schema.drop();
  });

  it('survives its backends being terminated, and the next requests succeed', async () => {
    const id = await createContact(server, 'survivor@example.com');
    // Several pooled connections, idle when they are cut.
    await Promise.all(Array.from({ length: 5 }, () => server.request('/contacts?limit=5')));
    expect(await terminateBackends(schema.applicationName)).toBeGreaterThan(0);
    await eventually(async () => (await backendCount(schema.applicationName)) === 0, 'the terminated backends are gone');
    // Still alive: the pool's errors were handled. Health recovers by itself, and so does everything else.
    await eventually(async () => (await server.request('/health')).status === 200, 'health answers 200 again');
    expect((await server.request('/contacts?limit=10')).status).toBe(200);
    expect((await patch(server, id, { plan: 'pro' })).status).toBe(200);
    const contact = await (await server.request(`/contacts/${id}`)).json();
    expect(contact.properties).toEqual({ plan: 'pro' });
  });
});

describe.skipIf(!backends.includes('postgres'))('health while PostgreSQL is unreachable', () => {
  let server: TestServer;
  let proxy: Awaited<ReturnType<typeof postgresProxy>>;
  let schema: Awaited<ReturnType<typeof namedSchema>>;
  beforeAll(async () => {
    schema = await namedSchema();
    proxy = await postgresProxy();
    server = await startTestServer('postgres', { config: { databaseUrl: proxy.via(schema.url), databaseConnectTimeoutMs: 1000 } });
  });
  afterAll(async () => {
    await proxy.up().catch(() => {});
    await server.close();
    await proxy.close();
    await schema.drop();
  });

  it('answers 503 service_unavailable while the database is down and 200 once it is back, by itself', async () => {
    await Promise.all(Array.from({ length: 5 }, () => server.request('/contacts?limit=5')));
    expect((await server.request('/health')).status).toBe(200);

    await proxy.down();
    const down = await server.request('/health');
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({ statusCode: 503, name: 'service_unavailable', message: expect.any(String) });
    // Other requests fail as unavailable, in the contract's error format, with when to try again, rather
    // than hang, answer 500 or take the process down.
    const failed = await server.request('/contacts?limit=1');
    expect(failed.status).toBe(503);
    expect(failed.headers.get('retry-after')).toBe('1');
    expect(await failed.json()).toEqual({ statusCode: 503, name: 'service_unavailable', message: 'The database cannot be reached right now; try again shortly.' });

    // An outage is the operator's to mend, not a fault of the server's: warnings, /health's too,
    // which a load balancer asks every few seconds.
    expect(server.logs.filter((line) => line.level >= 50)).toEqual([]);
    expect(server.logs.filter((line) => line.level === 40 && line.msg === 'request failed: the database could not be reached').length).toBeGreaterThanOrEqual(2);

    await proxy.up();
    await eventually(async () => (await server.request('/health')).status === 200, 'health answers 200 again');
    expect((await server.request('/contacts?limit=1')).status).toBe(200);
  });
});

describe.skipIf(!backends.includes('postgres'))('the PostgreSQL database dropped under a running server', () => {
  const database = `mailroom_dropped_${randomUUID().slice(0, 8)}`;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    await client.query(statement).finally(() => client.end());
  };
  let server: TestServer | undefined;
  afterAll(async () => {
    await server?.close();
    await admin(`drop database if exists ${database} with (force)`);
  });

  it('answers 503 with Retry-After, as for any outage, rather than 500', async () => {
    await admin(`create database ${database}`);
    const url = new URL(POSTGRES_URL);
    url.pathname = `/${database}`;
    server = await startTestServer('sqlite', { config: { databaseUrl: url.toString(), deliveryWorker: false } });
    expect((await server.request('/contacts?limit=1')).status).toBe(200);
    await admin(`drop database ${database} with (force)`);
    for (const path of ['/contacts?limit=1', '/segments']) {
      const res = await server.request(path);
      expect(res.status, path).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
    }
    expect((await server.request('/health')).status).toBe(503);
    expect(server.logs.filter((line) => line.level >= 50)).toEqual([]);
  });
});

describe.skipIf(!backends.includes('postgres'))('PostgreSQL refusing connections: too many for the role', () => {
  const role = `mailroom_limited_${randomUUID().slice(0, 8)}`;
  let server: TestServer;
  let schema: Awaited<ReturnType<typeof namedSchema>>;
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    await client.query(statement).finally(() => client.end());
  };
  beforeAll(async () => {
    schema = await namedSchema();
    await admin(`create role ${role} login connection limit 2`);
    await admin(`grant all on schema ${new URL(schema.url).searchParams.get('options')!.split('=')[1]} to ${role}`);
    server = await startTestServer('postgres', { config: { databaseUrl: schema.url.replace('//postgres@', `//${role}@`) } });
  });
  afterAll(async () => {
    await server.close();
    await schema.drop();
    await admin(`drop role ${role}`);
  });

  it('answers 503 service_unavailable with Retry-After, not 500, while PostgreSQL refuses more connections (53300)', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, () => server.request('/contacts?limit=5')));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.every((status) => status === 200 || status === 503), statuses.join(',')).toBe(true);
    const refused = answers.filter((answer) => answer.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const answer of refused) {
      expect(answer.headers.get('retry-after')).toBe('1');
      expect(await answer.json()).toEqual({ statusCode: 503, name: 'service_unavailable', message: 'The database cannot be reached right now; try again shortly.' });
    }
    await admin(`alter role ${role} connection limit -1`);
    const later = await Promise.all(Array.from({ length: 12 }, () => server.request('/contacts?limit=5')));
    expect(later.map((answer) => answer.status)).toEqual(Array(12).fill(200));
  });
});

describe.skipIf(!backends.includes('postgres'))('PostgreSQL up, every pooled connection busy', () => {
  let server: TestServer;
  let schema: Awaited<ReturnType<typeof namedSchema>>;
  beforeAll(async () => {
    schema = await namedSchema();
    server = await startTestServer('postgres', { config: { databaseUrl: schema.url, databaseConnectTimeoutMs: 300 } });
  });
  afterAll(async () => {
    await server.close();
    await schema.drop();
  });

  it('answers 503 saying no connection came free in time, not that the database cannot be reached', async () => {
    const { db } = server.store.database;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const held = Array.from({ length: server.store.database.poolUsage!().max }, () => db.connection().execute(() => released));
    await eventually(async () => server.store.database.poolUsage!().idle === 0 && server.store.database.poolUsage!().total === server.store.database.poolUsage!().max, 'every connection is held');
    const answer = await server.request('/contacts?limit=1');
    release();
    await Promise.all(held);
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('1');
    expect(await answer.json()).toEqual({ statusCode: 503, name: 'service_unavailable', message: 'No database connection came free in time: the database is busy or out of reach. Try again shortly.' });
    expect((await server.request('/contacts?limit=1')).status).toBe(200);
  });
});

describe.skipIf(!backends.includes('postgres'))('a PostgreSQL server that stops answering', () => {
  let server: TestServer;
  let proxy: Awaited<ReturnType<typeof postgresProxy>>;
  let schema: Awaited<ReturnType<typeof namedSchema>>;
  beforeAll(async () => {
    schema = await namedSchema();
    proxy = await postgresProxy();
    server = await startTestServer('postgres', { config: { databaseUrl: proxy.via(schema.url), databaseStatementTimeoutMs: 300, databaseConnectTimeoutMs: 1000 } });
  });
  afterAll(async () => {
    proxy.thaw();
    await server.close();
    await proxy.close();
    await schema.drop();
  });

  it('fails requests after the query timeout instead of hanging, and recovers when it answers again', async () => {
    expect((await server.request('/contacts?limit=1')).status).toBe(200);
    proxy.freeze();
    const [page, health] = await Promise.all([server.request('/contacts?limit=1'), server.request('/health')]);
    expect(page.status).toBe(503);
    expect(health.status).toBe(503);
    proxy.thaw();
    await eventually(async () => (await server.request('/health')).status === 200, 'health answers 200 again');
    expect((await server.request('/contacts?limit=1')).status).toBe(200);
  });
});

describe('SQLite shared with a delivery thread', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
  });
  afterAll(() => server.close());

  /**
   * Another connection to the file (as the delivery thread has) holds the write lock for `ms`, and
   * commits a change, so that a transaction which read before that commit cannot write after it.
   * Resolves once it holds the lock; `committedAt` says when it let go.
   */
  async function holdWriteLock(id: string, ms: number) {
    const holder = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       const db = new (require('better-sqlite3'))(workerData.file);
       db.exec('begin immediate');
       db.prepare("update contacts set updated_at = updated_at where id = ?").run(workerData.id);
       parentPort.postMessage('locked');
       setTimeout(() => { db.exec('commit'); parentPort.postMessage(Date.now()); db.close(); }, workerData.ms);`,
      { eval: true, workerData: { file: join(server.config.dataDir, 'mailroom.sqlite'), id, ms } },
    );
    const committedAt = new Promise<number>((resolve) => holder.on('message', (m) => typeof m === 'number' && resolve(m)));
    await new Promise((resolve) => holder.on('message', (m) => m === 'locked' && resolve(m)));
    return { committedAt, done: async () => (await committedAt, await holder.terminate()) };
  }

  it('waits for another connection to finish writing instead of failing with SQLITE_BUSY', async () => {
    const id = await createContact(server, 'busy@example.com');
    const lock = await holdWriteLock(id, 300);
    const res = await patch(server, id, { during: 'lock' });
    expect(res.status, await res.clone().text()).toBe(200);
    await lock.done();
    expect((await (await server.request(`/contacts/${id}`)).json()).properties).toEqual({ during: 'lock' });
  });

  it('keeps the thread running while a write waits for the lock', async () => {
    const id = await createContact(server, 'waiting@example.com');
    const lock = await holdWriteLock(id, 500);
    // SQLite's own busy handler would sleep in this thread until the lock was let go: no timer would
    // fire meanwhile, nor any request be read.
    const ticks: number[] = [];
    const timer = setInterval(() => ticks.push(Date.now()), 10);
    const res = await patch(server, id, { during: 'wait' });
    clearInterval(timer);
    expect(res.status, await res.clone().text()).toBe(200);
    const committedAt = await lock.committedAt;
    expect(ticks.filter((at) => at < committedAt).length).toBeGreaterThan(10);
    await lock.done();
    expect((await (await server.request(`/contacts/${id}`)).json()).properties).toEqual({ during: 'wait' });
  });

  it('answers every PATCH while a delivery thread commits deliveries', async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, (_, i) => createContact(server, `patched${i}@example.com`)));
    for (let b = 0; b < 5; b++) {
      const items = Array.from({ length: 100 }, (_, n) => ({ from: 'a@acme.dev', to: `d${b}-${n}@example.com`, subject: 'x', text: 'x' }));
      expect((await server.request('/emails/batch', { method: 'POST', headers: json, body: JSON.stringify(items) })).status).toBe(200);
    }
    // The delivery worker as `npm start` runs it: the built bundle, in a thread, on the same file.
    const thread = new Worker(new URL('../../build/worker.js', import.meta.url), {
      env: { ...process.env, DATA_DIR: server.config.dataDir, DATABASE_URL: '', SMTP_URL: '', LOG_LEVEL: 'silent' },
      stdout: true,
    });
    try {
      const statuses: number[] = [];
      await Promise.all(
        Array.from({ length: 120 }, async (_, n) => {
          const res = await patch(server, ids[n % ids.length]!, { [`k${n}`]: 'v' });
          statuses.push(res.status);
        }),
      );
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      await eventually(async () => {
        const { n } = await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('last_event', '=', 'delivered').executeTakeFirstOrThrow();
        return Number(n) === 500;
      }, 'all 500 emails delivered', 400);
    } finally {
      thread.postMessage('stop');
      await new Promise((resolve) => thread.on('exit', resolve));
    }
  });
});

describe.each(backends)('concurrent PATCHes on %s', (backend: Backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  it('keeps every property that 40 parallel PATCHes add', async () => {
    const id = await createContact(server, `merge-${randomUUID()}@example.com`);
    const statuses = await Promise.all(Array.from({ length: 40 }, (_, n) => patch(server, id, { [`key${n}`]: `value${n}` }).then((r) => r.status)));
    expect(statuses.every((s) => s === 200)).toBe(true);
    const contact = await (await server.request(`/contacts/${id}`)).json();
    expect(Object.keys(contact.properties).sort()).toEqual(Array.from({ length: 40 }, (_, n) => `key${n}`).sort());
  });

  it('keeps every property when the same contact is named by id and by email at once', async () => {
    const email = `both-${randomUUID()}@example.com`;
    const id = await createContact(server, email);
    await Promise.all(Array.from({ length: 20 }, (_, n) => patch(server, n % 2 ? id : email.toUpperCase(), { [`p${n}`]: 'x' })));
    const contact = await (await server.request(`/contacts/${id}`)).json();
    expect(Object.keys(contact.properties)).toHaveLength(20);
  });

  it('answers every create and delete of one email racing each other, none with 500', async () => {
    const email = `race-${randomUUID()}@example.com`;
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, lane) => {
        for (let n = 0; n < 40; n++) {
          const res =
            lane % 2
              ? await server.request(`/contacts/${email}`, { method: 'DELETE' })
              : await server.request('/contacts', { method: 'POST', headers: json, body: JSON.stringify({ email }) });
          statuses.push(res.status);
        }
      }),
    );
    expect(statuses.filter((s) => ![200, 201, 404].includes(s))).toEqual([]);
  });
});

describe.skipIf(!backends.includes('postgres'))('migrations on a PostgreSQL database shared with other schemas', () => {
  it("create their bookkeeping tables in the connection's schema even when another schema has them", async () => {
    const other = await namedSchema();
    const mine = await namedSchema();
    const first = await openStore({ databaseUrl: other.url, dataDir: tmpdir() });
    try {
      const second = await openStore({ databaseUrl: mine.url, dataDir: tmpdir() });
      expect((await second.database.db.selectFrom('contacts').select('id').execute()).length).toBe(0);
      await second.close();
    } finally {
      await first.close();
      await other.drop();
      await mine.drop();
    }
  });

  it('are not disturbed by other schemas being created and dropped while they run', async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    const churnName = `mailroom_churn_${randomUUID().slice(0, 8)}`;
    let churning = true;
    const churn = (async () => {
      // Schemas with many columns, so that reading every schema's tables takes a while, dropped one by one.
      const columns = Array.from({ length: 200 }, (_, c) => `c${c} int`).join(', ');
      let n = 0;
      for (; churning; n++) {
        await admin.query(`create schema ${churnName}_${n}; create table ${churnName}_${n}.t (${columns})`);
        if (n >= 5) await admin.query(`drop schema ${churnName}_${n - 5} cascade`);
      }
      for (let left = Math.max(0, n - 5); left < n; left++) await admin.query(`drop schema if exists ${churnName}_${left} cascade`);
    })();
    try {
      for (let n = 0; n < 10; n++) {
        const schema = await namedSchema();
        try {
          await (await openStore({ databaseUrl: schema.url, dataDir: tmpdir() })).close();
        } finally {
          await schema.drop();
        }
      }
    } finally {
      churning = false;
      await churn;
      await admin.end();
    }
  });
});

describe.skipIf(!backends.includes('postgres'))('a pooled PostgreSQL connection ended while checked out', () => {
  const applicationName = `mailroom-reconnect-${randomUUID().slice(0, 8)}`;
  let pool: pg.Pool;
  /** How many of the pool's connections have heard the server end them. */
  let endsHeard = 0;
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: POSTGRES_URL, application_name: applicationName, max: 2 });
    // As the store's pool does: a connection's end is heard by the query using it, not as an uncaught error.
    pool.on('error', () => {});
    pool.on('connect', (client) => client.on('error', () => {}).on('end', () => endsHeard++));
  });
  afterAll(() => pool.end());

  /** A connection from the pool whose backend has been ended, and which has heard so. */
  async function endedConnection() {
    const client = await reconnectingPool(pool).connect();
    await client.query('select 1', []);
    const heard = endsHeard;
    const terminated = await terminateBackends(applicationName);
    expect(terminated).toBeGreaterThan(0);
    await eventually(async () => (await backendCount(applicationName)) === 0, 'the terminated backend is gone');
    await eventually(async () => endsHeard === heard + terminated, "each connection has read the server's goodbye");
    return client;
  }

  it('runs a read, or a BEGIN, again on another connection', async () => {
    const reader = await endedConnection();
    expect((await reader.query<{ n: number }>('select 2 as n', [])).rows).toEqual([{ n: 2 }]);
    reader.release();
    const writer = await endedConnection();
    await writer.query('begin', []);
    expect((await writer.query<{ n: number }>('select 3 as n', [])).rows).toEqual([{ n: 3 }]);
    await writer.query('commit', []);
    writer.release();
  });

  it('does not run a statement again inside a transaction, which ended with its connection', async () => {
    const client = await reconnectingPool(pool).connect();
    await client.query('begin', []);
    expect(await terminateBackends(applicationName)).toBeGreaterThan(0);
    await eventually(async () => (await backendCount(applicationName)) === 0, 'the terminated backend is gone');
    const cut = await client.query('select 4 as n', []).then(() => undefined, (error: unknown) => error);
    expect(cut).toBeInstanceOf(Error);
    // A worker's round that fails so is taken up again: logged as a warning; a statement PostgreSQL refuses is an error.
    expect(failureLevel(cut)).toBe('warn');
    client.release();
    expect(failureLevel(await pool.query('select from nowhere').catch((error: unknown) => error))).toBe('error');
  });
});
