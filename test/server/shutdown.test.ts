// The server as an operator runs it (the build `npm start` runs, delivery thread included) under faults:
// clients that never read while it is asked to stop, its PostgreSQL backends terminated, and the keys
// command asked for help or given nonsense.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../server/store/index.ts';
import { backends, type Backend } from '../support/backends.ts';
import { startServerProcess } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { backendPids, eventually, listRequest, namedSchema, seedContacts, stalledReader, terminateBackends } from './faults.ts';

const root = new URL('../..', import.meta.url).pathname;
const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
const auth = { authorization: `Bearer ${TEST_KEY}` };

async function database(backend: Backend): Promise<{ env: Record<string, string>; applicationName?: string; drop: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-shutdown-'));
  dirs.push(dataDir);
  if (backend === 'sqlite') return { env: { DATA_DIR: dataDir, DATABASE_URL: '' }, drop: async () => {} };
  const schema = await namedSchema();
  return { env: { DATA_DIR: dataDir, DATABASE_URL: schema.url }, applicationName: schema.applicationName, drop: schema.drop };
}

describe.each(backends)('finding 11: SIGTERM with clients that never read, on %s', (backend: Backend) => {
  it('keeps serving others while 12 clients stall, then exits 0 once the grace period is over', async () => {
    const db = await database(backend);
    try {
      const store = await openStore({ dataDir: db.env.DATA_DIR!, databaseUrl: db.env.DATABASE_URL || undefined });
      await seedContacts({ store }, 20_000);
      await store.close();
      const server = await startServerProcess({ ...db.env, SHUTDOWN_GRACE_MS: '2000' });
      const readers = await Promise.all(Array.from({ length: 12 }, () => stalledReader(server.url, listRequest())));
      for (let round = 0; round < 3; round++) {
        const page = await fetch(`${server.url}/contacts?limit=10`, { headers: auth });
        expect(page.status).toBe(200);
        expect((await page.json()).data).toHaveLength(10);
        expect((await fetch(`${server.url}/health`)).status).toBe(200);
      }
      const asked = performance.now();
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      console.log(`finding 11 on ${backend}: exited ${Math.round(performance.now() - asked)} ms after SIGTERM, with 12 clients never reading`);
      expect(server.output()).toContain('shutdown grace period over');
      // The stalled clients never read a byte: the process did not wait for them.
      expect(readers.every((reader) => reader.bytesRead === 0)).toBe(true);
      readers.forEach((reader) => reader.destroy());
    } finally {
      await db.drop();
    }
  });
});

describe.skipIf(!backends.includes('postgres'))('finding 1: the process when its PostgreSQL backends are terminated', () => {
  it('keeps running, HTTP server and delivery thread both, and recovers by itself', async () => {
    const db = await database('postgres');
    try {
      const server = await startServerProcess({ ...db.env, DELIVERY_WORKER: 'on', SMTP_URL: '' });
      const send = async (to: string) => {
        const res = await fetch(`${server.url}/emails`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ from: 'a@acme.dev', to, subject: 'x', text: 'x' }) });
        expect(res.status).toBe(200);
        return (await res.json()).id as string;
      };
      const delivered = (id: string) => async () => (await (await fetch(`${server.url}/emails/${id}`, { headers: auth })).json()).last_event === 'delivered';
      await eventually(delivered(await send('before@example.com')), 'delivered before the fault', 200);

      for (let round = 0; round < 2; round++) {
        const terminated = await backendPids(db.applicationName!);
        expect(await terminateBackends(db.applicationName!)).toBeGreaterThan(0);
        // Its loops (delivery, fan-out, webhooks) reconnect at once: wait for the terminated ones only.
        const gone = async () => !(await backendPids(db.applicationName!)).some((pid) => terminated.includes(pid));
        await eventually(async () => (await gone()) || server.child.exitCode !== null, 'the backends are gone', 100);
        await eventually(async () => (await fetch(`${server.url}/health`).then((r) => r.status, () => 0)) === 200, 'health answers 200 again', 100);
        expect(server.child.exitCode).toBeNull();
        expect((await fetch(`${server.url}/contacts?limit=1`, { headers: auth })).status).toBe(200);
        await eventually(delivered(await send(`after${round}@example.com`)), 'delivered after the fault', 200);
      }
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    } finally {
      await db.drop();
    }
  });
});

describe('finding 13: the keys command asked for help, or misused', () => {
  const keys = (...args: string[]) =>
    promisify(execFile)(process.execPath, ['build/keys.js', ...args], { cwd: root, env: { ...process.env, DATA_DIR: join(tmpdir(), 'mailroom-keys-unused'), DATABASE_URL: '' } });

  it.each(['--help', '-h'])('prints the usage for %s and exits 0', async (flag) => {
    const { stdout, stderr } = await keys(flag);
    expect(stdout).toMatch(/^usage:/);
    expect(stdout).toContain('keys -- create --name NAME');
    expect(stderr).toBe('');
  });

  it.each([['--bogus'], ['create', '--name'], ['list', '--permission']])('prints the usage, no stack trace, and exits 2 for %s', async (...args) => {
    const failed = await keys(...args).then(
      () => undefined,
      (error) => error as { code: number; stderr: string },
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toContain('usage:');
    expect(failed?.stderr).not.toMatch(/\n\s+at /);
  });
});
