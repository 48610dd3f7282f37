// The server as an operator runs it: the build that `npm start` runs, in its own process, the keys
// command, graceful shutdown on SIGTERM with a request in flight, and a loud failure when the contract
// is broken.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { startServer } from '../../server/server.ts';
import { openStore } from '../../server/store/index.ts';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-process-'));
const env = { ...process.env, DATA_DIR: dataDir, PORT: '0', MAILROOM_API_KEY: '', DATABASE_URL: '', LOG_LEVEL: 'info', DELIVERY_WORKER: 'off' };

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Starts server/bin/main.ts and resolves once it logs where it listens. */
function start(): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const child = spawn(process.execPath, ['build/main.js'], { cwd: root, env });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    let stdout = '';
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      const url = /"url":"([^"]+)".*Mailroom is listening/.exec(stdout)?.[1];
      if (url) resolve({ child, url, stderr: () => stderr });
    });
    child.on('exit', (code) => reject(new Error(`exited ${code} before listening: ${stderr}`)));
  });
}

const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => child.on('exit', resolve));
// Deadline for a test that starts and stops the whole process several times: each waits on the process's
// own lines and exit, and on a busy machine a start can take many seconds.
const SEVERAL_STARTS_MS = 300_000;

describe('the server process', () => {
  let firstKey = '';

  it('creates and prints a key on first start, serves with it, and finishes an in-flight request on SIGTERM', async () => {
    const { child, url, stderr } = await start();
    // main.ts prints the key right after the listening line; give it a moment.
    for (let i = 0; i < 50 && !/re_[A-Za-z0-9]{32}/.test(stderr()); i++) await new Promise((r) => setTimeout(r, 20));
    firstKey = /re_[A-Za-z0-9]{32}/.exec(stderr())?.[0] ?? '';
    expect(firstKey).not.toBe('');
    const auth = { authorization: `Bearer ${firstKey}` };
    expect((await fetch(`${url}/contacts?limit=1`, { headers: auth })).status).toBe(200);

    // Enough contacts that the unpaginated list is still streaming when SIGTERM arrives.
    const store = await openStore({ dataDir });
    const at = new Date().toISOString();
    for (let i = 0; i < 30_000; i += 1000) {
      const rows = Array.from({ length: 1000 }, (_, j) => ({ id: randomUUID(), email: `p${i + j}@x.dev`, email_key: `p${i + j}@x.dev`, first_name: null, last_name: null, unsubscribed: 0, properties: '{}', created_at: at, updated_at: at }));
      await store.database.db.insertInto('contacts').values(rows).execute();
    }
    await store.close();

    const response = await fetch(`${url}/contacts`, { headers: auth });
    expect(response.status).toBe(200);
    child.kill('SIGTERM');
    const body = await response.json();
    expect(body.data).toHaveLength(30_000);
    expect(await exited(child)).toBe(0);
  });

  it('keeps its store across restarts and prints no new key', async () => {
    const { child, url, stderr } = await start();
    expect(stderr()).not.toContain('Created an API key');
    expect((await fetch(`${url}/contacts?limit=1`, { headers: { authorization: `Bearer ${firstKey}` } })).status).toBe(200);
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
  });

  it('stops with code 0 on a SIGTERM sent the moment it says it listens, its delivery threads still starting', async () => {
    // The line is written from the logger's thread: without a handler set before it, the signal ends
    // the process at once (killed, no exit code), some of the time; so, several times.
    for (let attempt = 0; attempt < 5; attempt++) {
      const child = spawn(process.execPath, ['build/main.js'], { cwd: root, env: { ...env, DELIVERY_WORKER: 'on', DELIVERY_THREADS: '2', MAILROOM_API_KEY: 're_' + 'a'.repeat(32) } });
      const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
      let stdout = '';
      child.stdout!.on('data', (chunk) => {
        stdout += chunk;
        if (/Mailroom is listening/.test(stdout) && !child.killed) child.kill('SIGTERM');
      });
      expect(await ended).toEqual({ code: 0, signal: null });
      expect(stdout).toContain('Mailroom stopped');
    }
  }, SEVERAL_STARTS_MS);

  it('manages keys with the keys command: create prints the key once, list shows it, revoke ends it', async () => {
    const keys = (...args: string[]) => run(process.execPath, ['build/keys.js', ...args], { cwd: root, env });
    const created = await keys('create', '--name', 'newsletter', '--permission', 'sending_access');
    const key = created.stdout.trim();
    expect(key).toMatch(/^re_[A-Za-z0-9]{32}$/);
    const listed = (await keys('list')).stdout;
    const line = listed.split('\n').find((l) => l.endsWith('newsletter'))!;
    expect(line).toContain('sending_access');
    expect(line).toContain(key.slice(0, 7));
    expect(listed).not.toContain(key);
    const id = line.split(' ')[0]!;
    expect((await keys('revoke', id)).stdout).toContain(id);
    expect((await keys('list')).stdout.split('\n').find((l) => l.endsWith('newsletter'))).toContain('revoked');
    await expect(keys('create')).rejects.toMatchObject({ code: 2 });
  });

  it('revokes the last full access key only with --force, and lists a name as text, never as terminal codes', async () => {
    const own = mkdtempSync(join(tmpdir(), 'mailroom-keys-'));
    const keys = (...args: string[]) =>
      run(process.execPath, ['build/keys.js', ...args], { cwd: root, env: { ...env, DATA_DIR: own } }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error) => error as { code: number; stdout: string; stderr: string },
      );
    try {
      await keys('create', '--name', 'red\u001b[31m alert', '--permission', 'sending_access');
      await keys('create', '--name', 'only admin');
      const listed = (await keys('list')).stdout;
      expect(listed).not.toContain('\u001b');
      expect(listed).toContain('red\\u001b[31m alert');
      const id = listed.split('\n').find((line) => line.endsWith('only admin'))!.split(' ')[0]!;
      const refused = await keys('revoke', id);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`${id} is the last full access key: with it revoked, no API key could manage the server. Create another first, or give --force`);
      expect((await keys('list')).stdout.split('\n').find((line) => line.endsWith('only admin'))).toContain('active');
      expect((await keys('revoke', id, '--force')).stdout).toContain(`Revoked ${id}`);
      expect((await keys('list')).stdout.split('\n').find((line) => line.endsWith('only admin'))).toContain('revoked');
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });

  it("refuses a name the contract's ApiKeyName refuses, and says which store it used", async () => {
    const keys = (extra: Record<string, string>, ...args: string[]) =>
      run(process.execPath, ['build/keys.js', ...args], { cwd: root, env: { ...env, ...extra } }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error) => error as { code: number; stdout: string; stderr: string },
      );
    const tooLong = await keys({}, 'create', '--name', 'n'.repeat(51));
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toMatch(/--name must be what the contract's ApiKeyName allows: must NOT have more than 50 characters/);
    expect((await keys({}, 'list')).stdout).not.toContain('n'.repeat(51));

    const listed = await keys({}, 'list');
    expect(listed.stderr).toContain(`Store: SQLite ${join(dataDir, 'mailroom.sqlite')} (DATA_DIR)`);
    // A mistyped DATA_DIR: nothing to list or revoke there, and no empty database left behind.
    const mistyped = join(dataDir, 'typo');
    for (const args of [['list'], ['revoke', 'some-id']]) {
      const refused = await keys({ DATA_DIR: mistyped }, ...args);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/there is no SQLite store at .*typo\/mailroom\.sqlite: check DATA_DIR/);
      expect(existsSync(mistyped)).toBe(false);
    }
    const created = await keys({ DATA_DIR: mistyped }, 'create', '--name', 'fresh');
    expect(created.code).toBe(0);
    expect(created.stderr).toContain(`Store: SQLite ${join(mistyped, 'mailroom.sqlite')} (DATA_DIR), a new database`);
  });

  // Root may write any file: the server runs as nobody here, where the system has setpriv and nobody
  // may read the build (a checkout in a private directory, as a CI clone may be, skips this).
  const NOBODY = ['--reuid=nobody', '--regid=nogroup', '--clear-groups'];
  const asNobody =
    process.getuid?.() === 0 &&
    existsSync('/usr/bin/setpriv') &&
    (() => {
      try {
        execFileSync('setpriv', [...NOBODY, process.execPath, '-e', 'require("node:fs").accessSync(process.argv[1])', join(root, 'build/main.js')], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    })();
  it.skipIf(!asNobody)('names DATA_DIR when its SQLite file opens but cannot be written', async () => {
    const readOnly = mkdtempSync(join(tmpdir(), 'mailroom-readonly-'));
    try {
      const store = await openStore({ ...loadConfig({}), dataDir: readOnly });
      await store.close();
      await run('chown', ['-R', 'nobody', readOnly]);
      await run('chmod', ['444', join(readOnly, 'mailroom.sqlite')]);
      const started = run('setpriv', [...NOBODY, process.execPath, 'build/main.js'], {
        cwd: root,
        env: { ...env, DATA_DIR: readOnly, MAILROOM_API_KEY: `re_${'b'.repeat(32)}` },
        timeout: 30_000,
      });
      const failed = await started.then(() => undefined, (error: { code?: number; stderr?: string }) => error);
      expect(failed?.code).toBe(1);
      expect(failed?.stderr).toContain(`the SQLite store in DATA_DIR ${readOnly} could not be opened: attempt to write a readonly database`);
    } finally {
      rmSync(readOnly, { recursive: true, force: true });
    }
  });

  it('refuses to start, loudly, when the contract is missing or invalid', async () => {
    const config = { ...loadConfig({}), port: 0, dataDir };
    await expect(startServer(config, { spec: join(dataDir, 'missing.yaml') })).rejects.toThrow(/ENOENT|no such file/);
    const broken = join(dataDir, 'broken.yaml');
    writeFileSync(broken, 'openapi: 3.1.0\ninfo: {title: x}\npaths:\n  /contacts: {get: {responses: 200}}\n');
    await expect(startServer(config, { spec: broken })).rejects.toThrow(/invalid/);
  });
});
