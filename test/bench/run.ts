// `npm run bench`: the full server against bare handlers sending the same bytes, measured in one run.
// Each server runs in its own process and autocannon in another, all on 127.0.0.1, bounded in time.
// Every section runs on SQLite, then on PostgreSQL (in a schema of its own, dropped after) when a server
// answers at DATABASE_URL, TEST_POSTGRES_URL or postgres://postgres@127.0.0.1:5432/test. BENCH_ONLY runs
// some sections alone (a comma-separated list of: memory, stream, delivery, dkim, rates, scale, fanout,
// webhooks, dashboard); BENCH_DATABASES=sqlite or =postgres one database; BENCH_MILLION=1 adds the
// 1,000,000-contact size to `scale`; BENCH_DELIVERY_SIZES=small or =large one message size in `delivery` and `dkim`.
// BENCH_CPU_PROF: below.
import { execFile, fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startServerProcess } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { openStore } from '../../server/store/index.ts';
import { storeCallCosts } from './bounds.ts';
import { benchDashboard } from './dashboard.ts';
import { benchDelivery, cpuMs } from './delivery.ts';
import { benchDkim } from './dkim.ts';
import { benchFanout, postgresReachable } from './fanout.ts';
import { benchGrowth } from './growth.ts';
import { benchWebhooks } from './webhooks.ts';

const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
// Runs alternate between the servers and the median is kept, so that a noisy neighbour slows all of
// them alike instead of whichever happened to run at the time.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** A delivery run takes seconds and varies by a tenth from one to the next here: more of them for its medians. */
const DELIVERY_ROUNDS = Number(process.env.BENCH_DELIVERY_ROUNDS ?? Math.max(ROUNDS, 5));
const CONNECTIONS = 16;
/** How long the memory section watches an idle server for its RSS to settle. */
const SETTLE_SECONDS = Number(process.env.BENCH_SETTLE_SECONDS ?? 120);
const SECTIONS = ['memory', 'stream', 'delivery', 'dkim', 'rates', 'scale', 'fanout', 'webhooks', 'dashboard'];
const only = process.env.BENCH_ONLY?.split(',').map((name) => name.trim());
const unknown = only?.filter((name) => !SECTIONS.includes(name));
if (unknown?.length) throw new Error(`BENCH_ONLY: no section ${unknown.join(', ')}; there are ${SECTIONS.join(', ')}`);
const wanted = (section: string) => !only || only.includes(section);
const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
// The servers run bundled, as `npm start` runs Mailroom, not through a TypeScript loader.
const targetScript = join(root, 'build', 'bench-target.js');
await run(process.execPath, [join(root, 'scripts/build.mjs'), join(root, 'test/bench/target.ts'), targetScript], { cwd: root });
// Without tsx's loader, which runs this script (NODE_OPTIONS, execArgv): the servers and the load
// generator run as plain Node.
const { NODE_OPTIONS: _, ...plainEnv } = process.env;
const postgresUrl = process.env.DATABASE_URL || process.env.TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';
/** The database the sections in hand run on: its environment for the servers, rebuilt for each database. */
let env: NodeJS.ProcessEnv & { DATA_DIR: string; BENCH_BODIES: string };

function environment(dataDir: string, databaseUrl: string): typeof env {
  // Webhooks may post to 127.0.0.1: the delivery section's receiver is there. MALLOC_ARENA_MAX as
  // `npm start` and the image set it, for every process measured alike.
  return { ...plainEnv, MALLOC_ARENA_MAX: '2', DATA_DIR: dataDir, DATABASE_URL: databaseUrl, MAILROOM_API_KEY: TEST_KEY, LOG_LEVEL: 'info', RATE_LIMIT_PER_SECOND: '0', BENCH_BODIES: join(dataDir, 'bodies.json'), WEBHOOK_ALLOW_PRIVATE: 'true' };
}

const storeOptions = () => ({ dataDir: env.DATA_DIR, databaseUrl: env.DATABASE_URL || undefined });

async function seed(): Promise<string> {
  const store = await openStore(storeOptions());
  const base = Date.parse('2026-01-01T00:00:00.000Z');
  for (let i = 0; i < CONTACTS; i += 2000) {
    const rows = Array.from({ length: Math.min(2000, CONTACTS - i) }, (_, j) => {
      const n = i + j;
      const at = new Date(base + n * 7).toISOString();
      return { id: randomUUID(), email: `c${n}@bench.dev`, email_key: `c${n}@bench.dev`, first_name: `First${n}`, last_name: `Last${n}`, unsubscribed: n % 10 === 0 ? 1 : 0, properties: JSON.stringify({ plan: 'pro', n: String(n) }), created_at: at, updated_at: at };
    });
    await store.database.db.insertInto('contacts').values(rows).execute();
  }
  const broadcast = randomUUID();
  await store.broadcasts.insert({
    id: broadcast, name: 'Bench', segment_id: randomUUID(), from_address: 'Acme <news@acme.dev>', subject: 'Hello', reply_to: '["support@acme.dev"]',
    preview_text: 'Preview', html: '<p>Hi {{{FIRST_NAME|there}}}</p>', text: 'Hi {{{FIRST_NAME|there}}}', status: 'draft', topic_id: null,
    created_at: new Date().toISOString(), scheduled_at: null, sent_at: null,
  });
  await store.close();
  return broadcast;
}

type Target = { child: ChildProcess; url: string; first: any; ask: (message: string) => Promise<any> };

async function startTarget(kind: 'mailroom' | 'contract' | 'express' | 'http' | 'sink' | 'deliver' | 'nodemailer', extraEnv: Record<string, string> = {}): Promise<Target> {
  // BENCH_CPU_PROF=<folder>: the Mailroom server, each delivery worker and the webhook outbox write a CPU profile there as they exit.
  const profile = (kind === 'deliver' || kind === 'mailroom') && process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = fork(targetScript, [kind], { env: { ...env, ...extraEnv }, execArgv: profile, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const first = await new Promise<any>((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`${kind} target exited ${code}`)));
  });
  const ask = (message: string) => new Promise((resolve) => { child.once('message', resolve); child.send(message); });
  return { child, url: first.url, first, ask };
}

const BATCH_EMAILS = Array.from({ length: 100 }, (_, n) => ({ from: 'Acme <news@acme.dev>', to: [`reader${n}@example.com`], subject: `Issue ${n}`, html: `<p>Hello reader ${n}, here is the news.</p>` }));
const BATCH = JSON.stringify(BATCH_EMAILS);

/**
 * Loads one endpoint of `target`. Besides the rate, the CPU time the target's process (all its threads)
 * spent a request: the server's own work, whatever share of the cores the load generator took.
 */
async function load(target: Target, path: string): Promise<{ rps: number; p50: number; p99: number; non2xx: number; cpuUs: number }> {
  const post = path.endsWith('/emails/batch') ? ['-m', 'POST', '-H', 'content-type=application/json', '-b', BATCH] : [];
  const cpuBefore = cpuMs(target.child.pid!);
  const { stdout } = await run('npx', ['autocannon', '--json', '-c', String(CONNECTIONS), '-d', String(SECONDS), '-H', `authorization=Bearer ${TEST_KEY}`, ...post, target.url + path], { maxBuffer: 64 << 20, env: plainEnv });
  const r = JSON.parse(stdout);
  const cpuUs = ((cpuMs(target.child.pid!) - cpuBefore) * 1000) / r.requests.total;
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx + r.errors, cpuUs };
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
/** Resident and peak resident memory of a process, from /proc (both threads of `npm start` count). */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

async function drain(res: Response): Promise<number> {
  let bytes = 0;
  const reader = res.body!.getReader();
  for (let part = await reader.read(); !part.done; part = await reader.read()) bytes += part.value.length;
  return bytes;
}

const authorized = { headers: { authorization: `Bearer ${TEST_KEY}` } };

/** Every section that runs on one database, against the database `env` names. */
async function benchDatabase(database: string): Promise<void> {
  console.log(`\n===== ${database} =====\n`);
  // The contacts are for memory, the stream and the request rates; the other sections write what they need.
  const broadcastId = ['memory', 'stream', 'rates', 'dashboard'].some(wanted) ? await seed() : '';
  const paths = { broadcast: `/broadcasts/${broadcastId}`, contactsPage: '/contacts?limit=100', batchOf100: '/emails/batch' };

  // 0. Memory, as an operator sees it: `npm start` (the server and its delivery thread, one process).
  // Idle is read twice. Three seconds after the first request, the heap still holds what start-up
  // grew: V8 gives its young generation back only once it sees the process idle, which took 20 to 90
  // seconds here. Settled is the lowest RSS over SETTLE_SECONDS of idling, as `ps` shows an idle
  // server. The stream runs on a fresh server, its peak (reset with clear_refs) against its own idle.
  if (wanted('memory')) {
    const idleServer = async <T>(use: (pid: number, url: string) => Promise<T>): Promise<T> => {
      const server = await startServerProcess(env as Record<string, string>);
      try {
        await fetch(`${server.url}/contacts?limit=1`, authorized); // the validator compiles its checks on first use
        await new Promise((resolve) => setTimeout(resolve, 3000));
        return await use(server.child.pid!, server.url);
      } finally {
        server.child.kill('SIGTERM');
        await server.exited;
      }
    };
    const { early, settled } = await idleServer(async (pid) => {
      const early = memoryOf(pid).rss;
      let settled = early;
      for (let second = 0; second < SETTLE_SECONDS; second += 5) {
        await new Promise((resolve) => setTimeout(resolve, 5000));
        settled = Math.min(settled, memoryOf(pid).rss);
      }
      return { early, settled };
    });
    const { idle, peak, bytes } = await idleServer(async (pid, url) => {
      const idle = memoryOf(pid).rss;
      writeFileSync(`/proc/${pid}/clear_refs`, '5');
      const bytes = await drain(await fetch(`${url}/contacts`, authorized));
      return { idle, peak: memoryOf(pid).peak, bytes };
    });
    const verdict = (ok: boolean) => (ok ? 'meets' : 'SHORT of');
    console.log(`Memory of npm start (server and delivery thread): settled idle ${mb(settled)} MB RSS (target < 100: ${verdict(settled < 100 * 2 ** 20)} it); ${mb(early)} MB 3s after start-up`);
    console.log(`  streaming ${CONTACTS.toLocaleString('en')} contacts (${mb(bytes)} MB): peak ${mb(peak)} MB = ${mb(peak - idle)} MB above its idle ${mb(idle)} MB (target <= 30: ${verdict(peak - idle <= 30 * 2 ** 20)} it)\n`);
  }

  const mailroom = await startTarget('mailroom');
  // 1. The unpaginated list, on a fresh server so that its peak RSS is the stream's. One small request
  // first: the validator compiles its checks on first use, which is start-up work, not streaming.
  if (wanted('stream')) {
    await fetch(`${mailroom.url}/contacts?limit=1`, authorized);
    const before = await mailroom.ask('stats');
    await mailroom.ask('reset');
    const started = performance.now();
    const bytes = await drain(await fetch(`${mailroom.url}/contacts`, authorized));
    const streamSeconds = (performance.now() - started) / 1000;
    const stream = await mailroom.ask('stats');
    console.log(`Unpaginated GET /contacts: ${CONTACTS.toLocaleString('en')} contacts, ${mb(bytes)} MB in ${streamSeconds.toFixed(2)}s (${Math.round(CONTACTS / streamSeconds).toLocaleString('en')} contacts/s)`);
    console.log(`  server peak RSS ${mb(stream.peakRssBytes)} MB (target < 150; ${mb(before.peakRssBytes)} MB before the stream), longest event-loop block ${stream.maxEventLoopDelayMs.toFixed(1)} ms (target < 50)\n`);
  }

  // 2. End-to-end delivery, against nodemailer alone, and without a webhook and with one (test/bench/delivery.ts).
  // 2b. The same delivery signed with a verified domain's DKIM key and unsigned (test/bench/dkim.ts).
  for (const section of ['delivery', 'dkim'].filter(wanted)) {
    const store = await openStore(storeOptions());
    try {
      const api = { url: mailroom.url, key: TEST_KEY, pid: mailroom.child.pid! };
      const threads = Number(process.env.BENCH_DELIVERY_THREADS ?? 1);
      const bench = { api, store, startTarget, rounds: DELIVERY_ROUNDS, threads, sizes: process.env.BENCH_DELIVERY_SIZES?.split(',') };
      await (section === 'delivery' ? benchDelivery(bench) : benchDkim(bench));
    } finally {
      await store.close();
    }
    console.log('');
  }

  // 3. Request rates: the full server, then the bare handlers sending the same bodies.
  if (wanted('rates')) {
    const bodies: Record<string, string> = {};
    for (const path of Object.values(paths)) {
      const init = path === paths.batchOf100 ? { method: 'POST', body: BATCH, headers: { 'content-type': 'application/json' } } : {};
      bodies[path] = await (await fetch(mailroom.url + path, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, ...init.headers } })).text();
    }
    writeFileSync(env.BENCH_BODIES, JSON.stringify(bodies));
    const servers = { mailroom, contract: await startTarget('contract'), express: await startTarget('express'), http: await startTarget('http') };
    const runs: Record<string, Record<string, Awaited<ReturnType<typeof load>>[]>> = { mailroom: {}, contract: {}, express: {}, http: {} };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, path] of Object.entries(paths)) {
        for (const [kind, target] of Object.entries(servers)) (runs[kind]![name] ??= []).push(await load(target, path));
      }
    }
    for (const target of [servers.contract, servers.express, servers.http]) target.child.kill('SIGTERM');
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const results = Object.fromEntries(
      Object.entries(runs).map(([kind, byName]) => [
        kind,
        Object.fromEntries(
          Object.entries(byName).map(([name, list]) => [
            name,
            { rps: median(list.map((r) => r.rps)), p50: median(list.map((r) => r.p50)), p99: median(list.map((r) => r.p99)), non2xx: list.reduce((n, r) => n + r.non2xx, 0), cpuUs: median(list.map((r) => r.cpuUs)) },
          ]),
        ),
      ]),
    );

    const targets: Record<string, number> = { broadcast: 0.5, contactsPage: 0.4, batchOf100: 0.25 };
    console.log('endpoint                    server          req/s    p50 ms   p99 ms   errors   CPU µs/req (its own process)');
    for (const [name, path] of Object.entries(paths)) {
      for (const kind of ['mailroom', 'contract', 'express', 'http']) {
        const r = results[kind]![name]!;
        const label = path === paths.batchOf100 ? 'POST /emails/batch (100)' : `GET ${path.replace(broadcastId, '{id}')}`;
        console.log(`${(kind === 'mailroom' ? label : '').padEnd(28)}${kind.padEnd(12)}${r.rps.toFixed(0).padStart(9)}${String(r.p50).padStart(10)}${String(r.p99).padStart(9)}${String(r.non2xx).padStart(9)}${r.cpuUs.toFixed(0).padStart(10)}`);
      }
    }
    console.log('\nratios (full server / bare handler, same run):');
    for (const name of Object.keys(paths)) {
      const full = results.mailroom![name]!.rps;
      const vsExpress = full / results.express![name]!.rps;
      const vsHttp = full / results.http![name]!.rps;
      const verdict = vsExpress >= targets[name]! ? 'meets' : 'SHORT of';
      console.log(`  ${name.padEnd(14)} ${(vsExpress * 100).toFixed(1)}% of bare Express (${verdict} the ${targets[name]! * 100}% target), ${(vsHttp * 100).toFixed(1)}% of bare node:http`);
    }
    // The contract target is Express with the validator's checks and no work of its own: no server
    // that checks requests and responses with these parts can pass its ratio.
    console.log('ceilings (Express with the contract\'s checks only, no auth or database / bare Express, same run):');
    for (const name of Object.keys(paths)) {
      const ceiling = results.contract![name]!.rps / results.express![name]!.rps;
      const reach = results.mailroom![name]!.rps / results.contract![name]!.rps;
      const verdict = ceiling >= targets[name]! ? 'the target is within it' : `the ${targets[name]! * 100}% target is above it`;
      console.log(`  ${name.padEnd(14)} ${(ceiling * 100).toFixed(1)}% (${verdict}); the full server reaches ${(reach * 100).toFixed(1)}% of the ceiling`);
    }
    // What the contract's checks and the store's work alone allow: where a target is above it, no
    // server built on these parts reaches that target on this machine.
    const store = await openStore(storeOptions());
    const costs = await storeCallCosts(store, broadcastId, BATCH_EMAILS).finally(() => store.close());
    console.log('bounds (the contract target plus the store\'s call, timed alone, and nothing else / bare Express):');
    for (const name of Object.keys(paths) as (keyof typeof costs)[]) {
      const best = 1 / (1 / results.contract![name]!.rps + costs[name] / 1000);
      const bound = best / results.express![name]!.rps;
      const verdict = bound >= targets[name]! ? 'the target is within it' : `the ${targets[name]! * 100}% target is above it`;
      console.log(`  ${name.padEnd(14)} store ${costs[name].toFixed(3)} ms a call: at best ${(bound * 100).toFixed(1)}% (${verdict}); the full server reaches ${((100 * results.mailroom![name]!.rps) / best).toFixed(1)}% of that`);
    }
    console.log(`\naccepted emails/s through POST /emails/batch: ${Math.round(results.mailroom!.batchOf100!.rps * 100).toLocaleString('en')}\n`);
  }

  if (wanted('dashboard') && database === 'SQLite') await benchDashboard(root, mailroom.url, TEST_KEY, CONTACTS);
  mailroom.child.kill('SIGTERM');
}

/** Cost as the data grows, on a database of its own that starts empty. */
async function growthSection(database: string): Promise<void> {
  const mailroom = await startTarget('mailroom', { LOG_LEVEL: 'warn' });
  const store = await openStore(storeOptions());
  try {
    const sizes = [10_000, 100_000, ...(process.env.BENCH_MILLION === '1' ? [1_000_000] : [])];
    await benchGrowth({ url: mailroom.url, apiKey: TEST_KEY, store, label: database, sizes });
  } finally {
    await store.close();
    mailroom.child.kill('SIGTERM');
  }
  console.log('');
}

/** Runs `sections` once per database: SQLite in a folder of its own, PostgreSQL in a schema of its own. */
async function onEachDatabase(name: string, sections: (database: string) => Promise<void>): Promise<void> {
  const which = process.env.BENCH_DATABASES ?? 'sqlite,postgres';
  const dataDir = mkdtempSync(join(tmpdir(), `mailroom-bench-${name}-`));
  try {
    if (which.includes('sqlite')) {
      env = environment(dataDir, '');
      await sections('SQLite');
    }
    if (!which.includes('postgres')) return;
    if (!(await postgresReachable(postgresUrl))) {
      console.log(`\nPostgreSQL: skipped, nothing answers at ${postgresUrl.replace(/\/\/[^@]*@/, '//')}`);
      return;
    }
    const schema = `mailroom_bench_${name}_${process.pid}`;
    const admin = new pg.Client({ connectionString: postgresUrl });
    await admin.connect();
    await admin.query(`create schema ${schema}`);
    try {
      env = environment(dataDir, `${postgresUrl}${postgresUrl.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`);
      await sections('PostgreSQL');
    } finally {
      await admin.query(`drop schema ${schema} cascade`);
      await admin.end();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

console.log(`Mailroom benchmark: ${CONTACTS.toLocaleString('en')} contacts; ${CONNECTIONS} connections, ${ROUNDS} rounds of ${SECONDS}s per server and endpoint, medians`);
if (['memory', 'stream', 'delivery', 'dkim', 'rates', 'dashboard'].some(wanted)) await onEachDatabase('main', benchDatabase);
if (wanted('scale')) await onEachDatabase('scale', growthSection);

// The broadcast fan-out of a large segment, and the webhook outbox, on both databases likewise.
env = environment(mkdtempSync(join(tmpdir(), 'mailroom-bench-')), '');
if (wanted('fanout')) {
  await benchFanout(targetScript, { ...env, LOG_LEVEL: 'warn' }, CONTACTS);
  console.log('');
}
if (wanted('webhooks')) await benchWebhooks(targetScript, { ...env, LOG_LEVEL: 'warn' }, Number(process.env.BENCH_WEBHOOKS ?? 10_000));
rmSync(env.DATA_DIR, { recursive: true, force: true });
