// The broadcast fan-out of one large segment, on SQLite and on PostgreSQL: recipients written to the
// outbox per second, the peak RSS of the process doing it, and the outbox's growth on disk per
// recipient. Run by `npm run bench` after the request rates, or alone: `tsx test/bench/fanout.ts`.
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { openStore, type Store } from '../../server/store/index.ts';

const RECIPIENTS_TARGET_SQLITE = 20_000;

/** Writes a segment of `contacts` contacts (every tenth unsubscribed) and a queued broadcast to it. */
async function prepare(store: Store, contacts: number): Promise<void> {
  const db = store.database.db;
  const segment = randomUUID();
  const at = new Date().toISOString();
  await db.insertInto('segments').values({ id: segment, name: 'Bench', created_at: at }).execute();
  for (let i = 0; i < contacts; i += 2000) {
    const rows = Array.from({ length: Math.min(2000, contacts - i) }, (_, j) => {
      const n = i + j;
      return { id: randomUUID(), email: `f${n}@bench.dev`, email_key: `f${n}@bench.dev`, first_name: `First${n}`, last_name: null, unsubscribed: n % 10 === 0 ? 1 : 0, properties: '{}', created_at: at, updated_at: at };
    });
    await db.insertInto('contacts').values(rows).execute();
    await db.insertInto('segment_contacts').values(rows.map((r) => ({ segment_id: segment, contact_id: r.id, contact_created_at: at, created_at: at }))).execute();
  }
  await store.broadcasts.insert({
    id: randomUUID(), name: 'Bench fan-out', segment_id: segment, from_address: 'Acme <news@acme.dev>', subject: 'Hi {{{FIRST_NAME|there}}}', reply_to: '["support@acme.dev"]',
    preview_text: null, html: '<p>Hi {{{FIRST_NAME|there}}}</p>', text: null, status: 'queued', topic_id: null, created_at: at, scheduled_at: null, sent_at: null,
  });
}

/** The bytes the outbox takes: SQLite's pages in use (the WAL's included), PostgreSQL's table, TOAST and indexes. */
async function outboxBytes(store: Store): Promise<number> {
  const db = store.database.db;
  if (store.database.dialect === 'postgres') {
    return Number((await sql<{ bytes: string }>`select pg_total_relation_size('emails') as bytes`.execute(db)).rows[0]!.bytes);
  }
  const { rows } = await sql<{ bytes: number }>`select (select page_count from pragma_page_count()) * (select page_size from pragma_page_size()) - (select freelist_count from pragma_freelist_count()) * (select page_size from pragma_page_size()) as bytes`.execute(db);
  return rows[0]!.bytes;
}

export async function postgresReachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Runs the fan-out in a process of its own (the bench target `fanout`) and reports what it measured. */
async function measure(targetScript: string, env: NodeJS.ProcessEnv, label: string, contacts: number): Promise<void> {
  const options = { dataDir: env.DATA_DIR!, databaseUrl: env.DATABASE_URL || undefined };
  const store = await openStore(options);
  try {
    await prepare(store, contacts);
    const before = await outboxBytes(store);
    const child = fork(targetScript, ['fanout'], { env, execArgv: [], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const result = await new Promise<{ recipients: number; seconds: number; peakRssBytes: number; startRssBytes: number }>((resolve, reject) => {
      child.once('message', (m: any) => resolve(m));
      child.once('exit', (code) => reject(new Error(`fan-out target exited ${code}`)));
    });
    child.kill('SIGTERM');
    const growth = (await outboxBytes(store)) - before;
    const rate = Math.round(result.recipients / result.seconds);
    const mb = (b: number) => (b / 2 ** 20).toFixed(0);
    const target = label === 'SQLite' ? ` (target >= ${RECIPIENTS_TARGET_SQLITE.toLocaleString('en')}/s: ${rate >= RECIPIENTS_TARGET_SQLITE ? 'meets' : 'SHORT of'} it)` : '';
    console.log(`Fan-out on ${label}: ${result.recipients.toLocaleString('en')} recipients of ${contacts.toLocaleString('en')} contacts in ${result.seconds.toFixed(2)}s = ${rate.toLocaleString('en')} recipients/s${target}`);
    console.log(`  peak RSS ${mb(result.peakRssBytes)} MB (${mb(result.startRssBytes)} MB before the fan-out); outbox grew ${mb(growth)} MB = ${Math.round(growth / result.recipients)} bytes per recipient`);
  } finally {
    await store.close();
  }
}

/** Both databases: SQLite in a folder of its own, PostgreSQL in a schema of its own when a server answers. */
export async function benchFanout(targetScript: string, baseEnv: NodeJS.ProcessEnv, contacts: number): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-bench-fanout-'));
  try {
    await measure(targetScript, { ...baseEnv, DATA_DIR: dataDir, DATABASE_URL: '' }, 'SQLite', contacts);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  const url = baseEnv.DATABASE_URL || process.env.TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';
  if (!(await postgresReachable(url))) {
    console.log(`Fan-out on PostgreSQL: skipped, nothing answers at ${url.replace(/\/\/[^@]*@/, '//')}`);
    return;
  }
  const schema = `mailroom_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  try {
    const scoped = `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    await measure(targetScript, { ...baseEnv, DATA_DIR: dataDir, DATABASE_URL: scoped }, 'PostgreSQL', contacts);
  } finally {
    await admin.query(`drop schema ${schema} cascade`);
    await admin.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { build } = await import('esbuild');
  const root = new URL('../..', import.meta.url).pathname;
  const targetScript = join(root, 'build', 'bench-target.js');
  await build({ entryPoints: [join(root, 'test/bench/target.ts')], outfile: targetScript, bundle: true, platform: 'node', format: 'esm', packages: 'external', target: 'node20', logLevel: 'warning' });
  const { NODE_OPTIONS: _, ...plainEnv } = process.env;
  await benchFanout(targetScript, { ...plainEnv, LOG_LEVEL: 'warn' }, Number(process.env.BENCH_FANOUT_CONTACTS ?? 100_000));
}
