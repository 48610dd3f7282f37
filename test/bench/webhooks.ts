// The webhook outbox on SQLite and on PostgreSQL: deliveries per second from a worker process (the
// bench target `webhooks`, with the default concurrency) to a receiver in this process on 127.0.0.1
// that answers 200 at once, from the worker's start to the last delivery recorded. Run by
// `npm run bench` after the fan-out, or alone: `tsx test/bench/webhooks.ts`.
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openStore } from '../../server/store/index.ts';
import { emailEvent, emailRecord, recordEvents, startCountingReceiver } from '../support/receiver.ts';

/** Writes a webhook for `email.sent` at `endpoint` and `events` such events, each owing it one delivery. */
async function prepare(env: NodeJS.ProcessEnv, endpoint: string, events: number): Promise<void> {
  const store = await openStore({ dataDir: env.DATA_DIR!, databaseUrl: env.DATABASE_URL || undefined });
  try {
    const at = new Date().toISOString();
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    await store.webhooks.insert({ id: randomUUID(), endpoint, events: '["email.sent"]', signing_secret: secret, status: 'enabled', status_reason: null, created_at: at, updated_at: at });
    for (let i = 0; i < events; i += 1000) {
      const emails = Array.from({ length: Math.min(1000, events - i) }, (_, n) => emailRecord({ to_addresses: JSON.stringify([`r${i + n}@example.com`]) }));
      await recordEvents(store, emails.map((e) => emailEvent('email.sent', e)), emails);
    }
  } finally {
    await store.close();
  }
}

async function measure(targetScript: string, env: NodeJS.ProcessEnv, label: string, events: number): Promise<void> {
  const receiver = await startCountingReceiver();
  try {
    await prepare(env, receiver.url, events);
    const child = fork(targetScript, ['webhooks'], { env: { ...env, WEBHOOK_ALLOW_PRIVATE: 'true' }, execArgv: process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const result = await new Promise<{ delivered: number; seconds: number; peakRssBytes: number }>((resolve, reject) => {
      child.once('message', (m: any) => resolve(m));
      child.once('exit', (code) => reject(new Error(`webhooks target exited ${code}`)));
    });
    child.kill('SIGTERM');
    const rate = Math.round(result.delivered / result.seconds);
    console.log(
      `Webhooks on ${label}: ${result.delivered.toLocaleString('en')} of ${events.toLocaleString('en')} deliveries in ${result.seconds.toFixed(2)}s = ${rate.toLocaleString('en')} deliveries/s ` +
        `(${receiver.posts().toLocaleString('en')} posts received); worker peak RSS ${(result.peakRssBytes / 2 ** 20).toFixed(0)} MB`,
    );
  } finally {
    await receiver.close();
  }
}

/** Both databases: SQLite in a folder of its own, PostgreSQL in a schema of its own when a server answers. */
export async function benchWebhooks(targetScript: string, baseEnv: NodeJS.ProcessEnv, events: number): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-bench-webhooks-'));
  try {
    await measure(targetScript, { ...baseEnv, DATA_DIR: dataDir, DATABASE_URL: '' }, 'SQLite', events);
    const url = baseEnv.DATABASE_URL || process.env.TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';
    const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    try {
      await admin.connect();
    } catch {
      console.log(`Webhooks on PostgreSQL: skipped, nothing answers at ${url.replace(/\/\/[^@]*@/, '//')}`);
      return;
    }
    const schema = `mailroom_bench_webhooks_${process.pid}`;
    await admin.query(`create schema ${schema}`);
    try {
      const scoped = `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
      await measure(targetScript, { ...baseEnv, DATA_DIR: dataDir, DATABASE_URL: scoped }, 'PostgreSQL', events);
    } finally {
      await admin.query(`drop schema ${schema} cascade`);
      await admin.end();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { build } = await import('esbuild');
  const root = new URL('../..', import.meta.url).pathname;
  const targetScript = join(root, 'build', 'bench-target.js');
  await build({ entryPoints: [join(root, 'test/bench/target.ts')], outfile: targetScript, bundle: true, platform: 'node', format: 'esm', packages: 'external', target: 'node20', logLevel: 'warning' });
  const { NODE_OPTIONS: _, ...plainEnv } = process.env;
  await benchWebhooks(targetScript, { ...plainEnv, LOG_LEVEL: 'warn' }, Number(process.env.BENCH_WEBHOOKS ?? 10_000));
}
