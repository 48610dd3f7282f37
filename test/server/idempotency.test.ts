// Idempotency claims: scoped to the API key that sent them, and unable to outlive the request or the
// process that holds them. On SQLite and PostgreSQL; the crash rounds run the build as `npm start` does.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import type { EmailRecord } from '../../server/store/emails.ts';
import { ClaimLostError, type HeldClaim } from '../../server/store/idempotency.ts';
import { openStore, type Store } from '../../server/store/index.ts';
import { backends, postgresSchema, type Backend } from '../support/backends.ts';
import { TEST_KEY } from '../support/server.ts';
import { WAIT_MS } from '../support/until.ts';

const root = new URL('../..', import.meta.url).pathname;
const email = (tag: string, n: number) => ({ from: 'Acme <hi@acme.dev>', to: [`user${n}@example.com`], subject: `${tag} #${n}`, text: `Hello ${n}` });
const templated = (tag: string, n: number) => ({ to: `user${n}@example.com`, subject: `${tag} #${n}`, template: { id: 'slow', variables: { NAME: `User ${n}` } } });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** POSTs a batch with an idempotency key; `signal` lets the caller walk away mid-request. */
function sendBatch(url: string, apiKey: string, idempotencyKey: string, items: unknown[], signal?: AbortSignal) {
  return fetch(`${url}/emails/batch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: JSON.stringify(items),
    signal,
  }).then(async (res) => ({ status: res.status, body: await res.json() }));
}

/** How many stored emails have a subject starting with `tag`, and their ids. */
async function storedIds(store: Store, tag: string): Promise<string[]> {
  const rows = await store.database.db.selectFrom('emails').select('id').where('subject', 'like', `${tag} #%`).execute();
  return rows.map((r) => r.id).sort();
}

// Deadline for the test that starts, kills and starts the server again round after round.
const KILL_ROUNDS_MS = 600_000;

/** Whether `condition` came to hold within `ms`. */
async function waitFor(condition: () => Promise<boolean>, ms = WAIT_MS): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(5)) if (await condition()) return true;
  return false;
}

/** A server as `npm start` runs it, on a fresh SQLite file or PostgreSQL schema, with its own view of the store. */
function serverProcesses(backend: Backend) {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-idem-'));
  const state: { store: Store; schema?: Awaited<ReturnType<typeof postgresSchema>>; url: string; child?: ChildProcess } = {} as never;
  beforeAll(async () => {
    state.schema = backend === 'postgres' ? await postgresSchema() : undefined;
    state.store = await openStore({ dataDir, databaseUrl: state.schema?.url });
  });
  afterAll(async () => {
    if (state.child?.exitCode === null) await stop(state.child);
    await state.store?.close();
    await state.schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  function start(): Promise<{ child: ChildProcess; url: string }> {
    const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: state.schema?.url ?? '', PORT: '0', MAILROOM_API_KEY: TEST_KEY, DELIVERY_WORKER: 'off', RATE_LIMIT_PER_SECOND: '0', LOG_LEVEL: 'info' };
    const child = spawn(process.execPath, ['build/main.js'], { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
    state.child = child;
    return new Promise((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (chunk) => {
        out += chunk;
        const url = /"url":"([^"]+)".*Mailroom is listening/.exec(out)?.[1];
        if (url) resolve({ child, url: (state.url = url) });
      });
      child.on('exit', (code) => reject(new Error(`exited ${code} before listening`)));
    });
  }
  return { state, start };
}

function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  return exited;
}

describe.each(backends)('idempotency claims on %s', (backend) => {
  const { state, start } = serverProcesses(backend);
  beforeAll(async () => {
    const { url } = await start();
    // A published template with a long body: a batch of 100 sent with it keeps the server busy a while.
    const html = `<p>Hello {{{NAME|there}}}</p>${'<p>Lorem ipsum {{{NAME}}} dolor sit amet.</p>'.repeat(400)}`;
    const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
    const created = await (await fetch(`${url}/templates`, { method: 'POST', headers, body: JSON.stringify({ name: 'Slow', alias: 'slow', from: 'Acme <hi@acme.dev>', subject: 'Slow', html }) })).json();
    expect((await fetch(`${url}/templates/${created.id}/publish`, { method: 'POST', headers })).status).toBe(200);
  });

  const claimOf = (key: string) => state.store.database.db.selectFrom('idempotency_records').selectAll().where('key', '=', key).executeTakeFirst();

  it('gives two API keys using the same Idempotency-Key each their own result', async () => {
    const other = await createKey(state.store, 'other', 'sending_access');
    const mine = await sendBatch(state.url, TEST_KEY, 'shared-key', [email('shared mine', 1)]);
    const theirs = await sendBatch(state.url, other.key, 'shared-key', [email('shared theirs', 1)]);
    expect(mine.status).toBe(200);
    expect(theirs.status).toBe(200);
    // The same body too: the second key's request is its own, not a replay of the first key's.
    const sameBody = await sendBatch(state.url, other.key, 'same-body', [email('shared same', 1)]);
    const sameBodyMine = await sendBatch(state.url, TEST_KEY, 'same-body', [email('shared same', 1)]);
    expect(sameBodyMine.status).toBe(200);
    expect(sameBodyMine.body.data[0].id).not.toBe(sameBody.body.data[0].id);
    // Each key's replays are its own.
    expect(await sendBatch(state.url, TEST_KEY, 'shared-key', [email('shared mine', 1)])).toEqual(mine);
    expect(await sendBatch(state.url, other.key, 'shared-key', [email('shared theirs', 1)])).toEqual(theirs);
    expect(await storedIds(state.store, 'shared mine')).toEqual([mine.body.data[0].id]);
    expect(await storedIds(state.store, 'shared theirs')).toEqual([theirs.body.data[0].id]);
    expect((await storedIds(state.store, 'shared same')).length).toBe(2);
  });

  /**
   * On PostgreSQL, holds the templates table so that a batch sent with a template stops mid-request,
   * after its key is claimed, until the returned function lets it go. SQLite cannot stop one request
   * without stopping the whole server, so there the client walks away as early as it can.
   */
  async function holdTemplates(): Promise<() => Promise<void>> {
    if (backend !== 'postgres') return async () => {};
    const session = new pg.Client({ connectionString: state.schema!.url, application_name: 'mailroom idempotency test' });
    await session.connect();
    await session.query('begin');
    await session.query('lock table templates in access exclusive mode');
    return async () => {
      await session.query('rollback');
      await session.end();
    };
  }

  /** Whether a server session is waiting for the templates table. */
  async function stoppedAtTemplates(): Promise<boolean> {
    if (backend !== 'postgres') return true;
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_locks where not granted and relation = 'templates'::regclass`.execute(state.store.database.db);
    return rows[0]!.n > 0;
  }

  /**
   * Sends the batch and walks away once the server has claimed its key and is still at work, then
   * waits (bounded) for the claim to be settled. Returns whether the client did walk away mid-request.
   */
  async function abandon(key: string, items: unknown[]): Promise<boolean> {
    const letGo = await holdTemplates();
    try {
      const controller = new AbortController();
      const request = sendBatch(state.url, TEST_KEY, key, items, controller.signal).then(() => false, () => true);
      await waitFor(async () => (await claimOf(key)) !== undefined && (await stoppedAtTemplates()));
      controller.abort();
      const aborted = await request;
      await sleep(100); // for the server to see the connection close while it waits
      await letGo();
      await waitFor(async () => (await claimOf(key))?.state !== 'in_flight');
      return aborted;
    } finally {
      await letGo().catch(() => {});
    }
  }

  it('settles the claim of a client that walked away: its retry is answered and the batch stored once', async () => {
    for (let round = 0; round < 5; round++) {
      const tag = `walked away ${round}`;
      const items = Array.from({ length: 100 }, (_, n) => templated(tag, n));
      const aborted = await abandon(`walk-${round}`, items);
      const retry = await sendBatch(state.url, TEST_KEY, `walk-${round}`, items);
      expect(retry.status, JSON.stringify(retry.body)).toBe(200);
      const stored = await storedIds(state.store, tag);
      expect(stored).toHaveLength(100);
      expect(retry.body.data.map((d: { id: string }) => d.id).sort()).toEqual(stored);
      if (aborted) return;
    }
    throw new Error('the server answered every batch before the client could walk away');
  });

  it('gives back the key of a refused request whose client walked away', async () => {
    for (let round = 0; round < 5; round++) {
      const tag = `refused ${round}`;
      const items: unknown[] = Array.from({ length: 100 }, (_, n) => templated(tag, n));
      const bad = [...items.slice(0, 99), { ...(items[99] as object), to: 'not an address' }];
      const aborted = await abandon(`refused-${round}`, bad);
      expect(await claimOf(`refused-${round}`)).toBeUndefined();
      const again = await sendBatch(state.url, TEST_KEY, `refused-${round}`, bad);
      expect(again).toMatchObject({ status: 422, body: { name: 'validation_error' } });
      const fixed = await sendBatch(state.url, TEST_KEY, `refused-${round}`, items);
      expect(fixed.status).toBe(200);
      expect(await storedIds(state.store, tag)).toHaveLength(100);
      if (aborted) return;
    }
    throw new Error('the server answered every batch before the client could walk away');
  });
});

describe.each(backends)('a server killed mid-request, on %s', (backend: Backend) => {
  const { state, start } = serverProcesses(backend);

  it('answers every retry after a restart with a replay or a fresh run, never 409, and stores each batch once', { timeout: KILL_ROUNDS_MS }, async () => {
    const ROUNDS = 6;
    const REQUESTS = 6;
    let inFlightAtKill = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const first = await start();
      const batches = Array.from({ length: REQUESTS }, (_, i) => ({ key: `kill-${round}-${i}`, tag: `kill ${round}.${i}`, items: Array.from({ length: 100 }, (_, n) => email(`kill ${round}.${i}`, n)) }));
      const sent = batches.map((b) => sendBatch(first.url, TEST_KEY, b.key, b.items).catch(() => undefined));
      // Kill once a claim is in flight, so that the process dies holding it (or once every batch is done,
      // had none been seen in flight).
      const claims = () => state.store.database.db.selectFrom('idempotency_records').select('state').where('key', 'in', batches.map((b) => b.key)).execute();
      await waitFor(async () => {
        const now = await claims();
        return now.some((c) => c.state === 'in_flight') || now.length === REQUESTS;
      });
      await stop(first.child, 'SIGKILL');
      inFlightAtKill += (await claims()).filter((c) => c.state === 'in_flight').length;
      await Promise.all(sent);

      const second = await start();
      for (const b of batches) {
        const retry = await sendBatch(second.url, TEST_KEY, b.key, b.items);
        expect(retry.status, `round ${round}, ${b.key}: ${JSON.stringify(retry.body)}`).toBe(200);
        const stored = await storedIds(state.store, b.tag);
        expect(stored, `${b.key} stored once`).toHaveLength(100);
        expect(retry.body.data.map((d: { id: string }) => d.id).sort()).toEqual(stored);
      }
      await stop(second.child);
    }
    console.log(`idempotency kill test (${backend}): ${ROUNDS} rounds, ${inFlightAtKill} claim(s) in flight at the kill`);
    expect(inFlightAtKill).toBeGreaterThan(0);
  });
});

describe.each(backends)('claims held by a process, on %s', (backend: Backend) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-idem-holders-'));
  let schema: Awaited<ReturnType<typeof postgresSchema>> | undefined;
  let first: Store;
  let second: Store;
  beforeAll(async () => {
    schema = backend === 'postgres' ? await postgresSchema() : undefined;
    first = await openStore({ dataDir, databaseUrl: schema?.url });
    second = await openStore({ dataDir, databaseUrl: schema?.url });
  });
  afterAll(async () => {
    await first?.close();
    await second?.close();
    await schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const at = new Date().toISOString();
  const record = (subject: string): EmailRecord => ({ id: randomUUID(), from_address: 'hi@acme.dev', to_addresses: '["a@b.dev"]', cc: null, bcc: null, reply_to: null, subject, html: null, text: 'x', headers: null, tags: null, last_event: 'queued', attempts: 0, scheduled_at: null, next_attempt_at: at, message_id: null, last_error: null, created_at: at, updated_at: at, broadcast_id: null, contact_id: null });
  const claim = (store: Store, key: string, abandonedMs = 300_000) => store.idempotency.claim({ owner: 'k', scope: 'POST /emails/batch', key }, 'f', new Date(), 86_400_000, abandonedMs);

  it('refuses to commit for a request whose claim was taken over, and stores nothing', async () => {
    const mine = await claim(first, 'taken-over');
    expect('claim' in mine).toBe(true);
    // A live holder's claim is not taken over, except by the last resort for claims that look stuck.
    expect(await claim(second, 'taken-over')).toMatchObject({ held: { state: 'in_flight' } });
    const theirs = await claim(second, 'taken-over', 0);
    expect('claim' in theirs).toBe(true);
    const row = record('taken over #0');
    await expect(first.acceptEmails([row], { claim: (mine as { claim: HeldClaim }).claim, status: 200, body: {} })).rejects.toBeInstanceOf(ClaimLostError);
    expect(await storedIds(first, 'taken over')).toEqual([]);
    await second.acceptEmails([row], { claim: (theirs as { claim: HeldClaim }).claim, status: 200, body: {} });
    expect(await storedIds(first, 'taken over')).toEqual([row.id]);
  });

  it("takes over its own claim once the request holding it has ended: one left behind when giving it back failed", async () => {
    const mine = await claim(first, 'left-behind');
    expect('claim' in mine).toBe(true);
    // The request is still running: a retry of it waits (409 concurrent_idempotent_requests).
    expect(await claim(first, 'left-behind')).toMatchObject({ held: { state: 'in_flight' } });
    // It ended, and its release never reached the database: the retry runs, rather than meeting 409 for minutes.
    first.idempotency.settled((mine as { claim: HeldClaim }).claim);
    expect('claim' in (await claim(first, 'left-behind'))).toBe(true);
    // Another live process still waits for it.
    expect(await claim(second, 'left-behind')).toMatchObject({ held: { state: 'in_flight' } });
  });

  it.runIf(backend === 'postgres')('takes the lock again when its session drops; meanwhile its claims can be taken over', async () => {
    const mine = await claim(first, 'dropped-session');
    const holder = (mine as { claim: HeldClaim }).claim.holder;
    const holders = () => sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where application_name = ${`mailroom claims ${holder}`}`.execute(second.database.db).then((r) => r.rows[0]!.n);
    expect(await holders()).toBe(1);
    await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${`mailroom claims ${holder}`}`.execute(second.database.db);
    expect(await waitFor(async () => (await holders()) === 0)).toBe(true);
    expect('claim' in (await claim(second, 'dropped-session'))).toBe(true);
    // The same holder id comes back, so the claims it takes from now on are alive again.
    expect(await waitFor(async () => (await holders()) === 1)).toBe(true);
    await claim(first, 'after-reconnect');
    expect(await claim(second, 'after-reconnect')).toMatchObject({ held: { state: 'in_flight', holder } });
  });
});
