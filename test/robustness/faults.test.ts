// Faults under traffic, against the server as `npm start` runs it: its PostgreSQL connections
// terminated mid-traffic, and SIGKILL with idempotent batches in flight, then a restart and
// a retry of every key. Each phase's statuses are printed.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../server/store/index.ts';
import { backends, POSTGRES_URL, postgresSchema } from '../support/backends.ts';
import { startServerProcess } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { send } from './http.ts';

const SEED = Number(process.env.FC_SEED ?? 20261121);
const auth: [string, string][] = [['Authorization', `Bearer ${TEST_KEY}`]];
const json: [string, string][] = [...auth, ['Content-Type', 'application/json']];
const batchOf = (tag: string, n: number) => Array.from({ length: n }, (_, i) => ({ from: 'Acme <news@acme.dev>', to: `r${i}@example.com`, subject: `${tag} ${i}`, text: 'x' }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

/** Counts statuses by phase; `hang` is no answer within 10 s, `no answer` a refused or cut connection. */
class Phases {
  readonly seen: Record<string, Record<string, number>> = {};
  note(phase: string, what: string, status: number | string) {
    const key = `${what} ${status}`;
    (this.seen[phase] ??= {})[key] = (this.seen[phase]![key] ?? 0) + 1;
  }
}

describe.skipIf(!backends.includes('postgres'))('PostgreSQL connections terminated mid-traffic', () => {
  it('keeps the process up, answers /health 200 or 503, recovers within 10 s, and delivers every accepted email', async () => {
    const schema = await postgresSchema();
    cleanups.push(schema.drop);
    const application = `mailroom_robust_${process.pid}_${randomUUID().slice(0, 8)}`;
    const server = await startServerProcess({ DATABASE_URL: `${schema.url}&application_name=${application}` });
    cleanups.push(async () => server.child.kill('SIGKILL'));
    const phases = new Phases();
    const accepted: string[] = [];

    // One round of what clients do: a page of contacts, the health check, a batch of five.
    const round = async (phase: string) => {
      const answers = await Promise.all([
        send(server.url, { method: 'GET', path: '/contacts?limit=10', headers: auth }, 10_000),
        send(server.url, { method: 'GET', path: '/health', headers: [] }, 10_000),
        send(server.url, { method: 'POST', path: '/emails/batch', headers: [...json, ['Idempotency-Key', randomUUID()]], body: JSON.stringify(batchOf(phase, 5)) }, 10_000),
      ]);
      const statuses = answers.map((a) => ('status' in a ? a.status : a.error.startsWith('no answer') ? 'hang' : 'no answer'));
      ['contacts', 'health', 'batch'].forEach((what, i) => phases.note(phase, what, statuses[i]!));
      const batch = answers[2]!;
      if ('status' in batch && batch.status === 200) accepted.push(...JSON.parse(batch.text).data.map((d: { id: string }) => d.id));
      return statuses;
    };

    for (const end = Date.now() + 2_000; Date.now() < end; ) await round('before');
    // Terminate this server's connections (and only these: others share the database) a few times.
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    let terminated = 0;
    const during: (number | string)[][] = [];
    for (let i = 0; i < 3; i++) {
      const killed = await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1', [application]);
      terminated += killed.rowCount ?? 0;
      during.push(await round('during'), await round('during'));
    }
    await admin.end();

    // Recovery: the first moment a whole round succeeds, within 10 s.
    const faultEnded = Date.now();
    let recoveredMs: number | undefined;
    while (server.alive() && Date.now() - faultEnded < 10_000) {
      const statuses = await round('recovering');
      if (statuses.every((s) => s === 200)) {
        recoveredMs = Date.now() - faultEnded;
        break;
      }
      await sleep(200);
    }
    const after: (number | string)[][] = [];
    if (recoveredMs !== undefined) for (let i = 0; i < 5; i++) after.push(await round('after'));

    // Every accepted email is still there and gets delivered (the capture transport marks it so).
    const states: Record<string, number> = {};
    for (const end = Date.now() + 20_000; server.alive() && Date.now() < end; await sleep(300)) {
      const events = await Promise.all(accepted.map((id) => send(server.url, { method: 'GET', path: `/emails/${id}`, headers: auth }, 10_000)));
      for (const key of Object.keys(states)) delete states[key];
      for (const e of events) {
        const state = 'status' in e ? (e.status === 200 ? JSON.parse(e.text).last_event : e.status) : 'no answer';
        states[state] = (states[state] ?? 0) + 1;
      }
      if (states.delivered === accepted.length) break;
    }

    const alive = server.alive();
    console.log(
      `robustness pg-terminate: ${terminated} backends terminated; process ${alive ? 'alive' : `exited ${await server.exited}`}; recovered ${recoveredMs === undefined ? 'never' : `after ${recoveredMs} ms`}; ${accepted.length} emails accepted, final states ${JSON.stringify(states)}; phases ${JSON.stringify(phases.seen)}`,
    );
    if (!alive) console.log(`robustness pg-terminate: why it exited: ${server.output().split('\n').filter((l) => /error/i.test(l) && !l.includes('"msg":"request"')).slice(-6).join('\n')}`);
    expect(terminated).toBeGreaterThan(0);
    expect(alive).toBe(true);
    expect(during.flat().filter((s) => s === 'hang')).toEqual([]);
    expect(Object.keys(phases.seen.during ?? {}).filter((k) => k.startsWith('health') && !/ (200|503)$/.test(k))).toEqual([]);
    expect(recoveredMs).toBeDefined();
    expect(after.flat().filter((s) => s !== 200)).toEqual([]);
    expect(states.delivered).toBe(accepted.length);
    server.child.kill('SIGTERM');
    await server.exited;
  });
});

describe.each(backends)('SIGKILL with idempotent batches in flight, on %s', (backend) => {
  it('answers every retried key 200 (a replay, or a fresh run), never 409 or 5xx, and stores each batch once', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-robust-kill-'));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const schema = backend === 'postgres' ? await postgresSchema() : undefined;
    if (schema) cleanups.push(schema.drop);
    const env = { DATA_DIR: dataDir, DATABASE_URL: schema?.url ?? '' };
    const ROUNDS = 3;
    const KEYS = 10;
    const SIZE = 50;
    const delays = fc.sample(fc.integer({ min: 40, max: 300 }), { seed: SEED, numRuns: ROUNDS });
    const tally: Record<string, number> = {};
    const problems: string[] = [];

    for (const [round, delay] of delays.entries()) {
      const first = await startServerProcess(env);
      cleanups.push(async () => first.child.kill('SIGKILL'));
      const requests = Array.from({ length: KEYS }, (_, k) => ({ key: `kill-${round}-${k}-${randomUUID()}`, body: JSON.stringify(batchOf(`round ${round} key ${k}`, SIZE)) }));
      // Staggered, so that whenever the kill comes some request is likely half done.
      const inFlight = requests.map((r, k) =>
        sleep(k * 25).then(() => send(first.url, { method: 'POST', path: '/emails/batch', headers: [...json, ['Idempotency-Key', r.key]], body: r.body }, 15_000)),
      );
      await sleep(delay);
      first.child.kill('SIGKILL');
      await first.exited;
      const before = await Promise.all(inFlight);
      before.forEach((a) => (tally[`first ${'status' in a ? a.status : 'cut'}`] = (tally[`first ${'status' in a ? a.status : 'cut'}`] ?? 0) + 1));

      const second = await startServerProcess(env);
      cleanups.push(async () => second.child.kill('SIGKILL'));
      const retries = await Promise.all(requests.map((r) => send(second.url, { method: 'POST', path: '/emails/batch', headers: [...json, ['Idempotency-Key', r.key]], body: r.body }, 15_000)));
      second.child.kill('SIGTERM');
      await second.exited;

      const store = await openStore({ dataDir, databaseUrl: schema?.url });
      for (const [k, retry] of retries.entries()) {
        const status = 'status' in retry ? retry.status : 'cut';
        tally[`retry ${status}`] = (tally[`retry ${status}`] ?? 0) + 1;
        if (status !== 200) {
          problems.push(`round ${round} key ${k}: retry answered ${status} ${'text' in retry ? retry.text.slice(0, 120) : retry.error}`);
          continue;
        }
        const ids: string[] = JSON.parse((retry as { text: string }).text).data.map((d: { id: string }) => d.id);
        const firstAnswer = before[k]!;
        if ('status' in firstAnswer && firstAnswer.status === 200 && firstAnswer.text !== (retry as { text: string }).text) problems.push(`round ${round} key ${k}: the retry is not a replay of the answer the first request got`);
        const rows = await store.database.db.selectFrom('emails').select('id').where('subject', 'like', `round ${round} key ${k} %`).execute();
        if (rows.length !== SIZE || JSON.stringify(rows.map((r) => r.id).sort()) !== JSON.stringify([...ids].sort())) {
          problems.push(`round ${round} key ${k}: ${rows.length} emails stored for a batch of ${SIZE}, ids ${rows.length === ids.length ? 'differ from' : 'unlike'} the answer's`);
        }
      }
      await store.close();
    }
    console.log(`robustness sigkill ${backend}: ${ROUNDS} rounds of ${KEYS} keys, kill after ${JSON.stringify(delays)} ms; answers ${JSON.stringify(tally)}; problems: ${problems.length}`);
    if (problems.length) console.log(`robustness sigkill ${backend} problems:\n  ${problems.join('\n  ')}`);
    expect(problems).toEqual([]);
  });
});
