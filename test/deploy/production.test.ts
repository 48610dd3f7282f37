// The production path from a clean clone: `npm ci --omit=dev`, then `npm start`, `npm run keys` and
// `npm run worker`, with no dev dependency installed. SIGTERM sent to npm itself (what a process
// manager or `docker stop` signals) stops the server and npm, both with code 0.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_KEY } from '../support/server.ts';
import { productionInstall, productionPath } from './install.ts';

const run = promisify(execFile);
let dir = '';
/** Node processes started under npm: ended in afterAll, by pid, should npm have left one behind. */
const nodePids: number[] = [];
const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-production-data-'));

beforeAll(() => {
  dir = productionInstall();
}, 180_000);
afterAll(() => {
  for (const pid of nodePids) if (running(pid)) process.kill(pid, 'SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
});

const env = () => ({
  ...process.env,
  PATH: productionPath(),
  NODE_ENV: 'production',
  // Production refuses mail from domains not registered; the test sends from acme.dev, which is not.
  REQUIRE_VERIFIED_DOMAIN: 'false',
  PORT: '0',
  DATA_DIR: dataDir,
  DATABASE_URL: '',
  // Production refuses to start without a relay unless capture is asked for; nothing here is sent.
  SMTP_URL: 'capture:',
  MAILROOM_API_KEY: TEST_KEY,
  LOG_LEVEL: 'info',
  SHUTDOWN_GRACE_MS: '5000',
});

/** Runs `npm <args>` in the install until a log line matches `ready`; returns npm and the node pid. */
function npm(args: string[], ready: RegExp) {
  const child = spawn('npm', args, { cwd: dir, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  const started = new Promise<{ line: string; pid: number }>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk;
      const line = output.split('\n').find((l) => ready.test(l));
      if (!line) return;
      const { pid } = JSON.parse(line) as { pid: number };
      nodePids.push(pid);
      resolve({ line, pid });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => reject(new Error(`npm ${args.join(' ')} exited (${code}) first: ${output.slice(-1500)}`)));
  });
  return { child, started, exited, output: () => output };
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the production path, without dev dependencies', () => {
  it('npm start serves, and SIGTERM to npm stops npm and the server, both with code 0', async () => {
    const start = npm(['start'], /Mailroom is listening/);
    const { line, pid } = await start.started;
    expect(pid).not.toBe(start.child.pid);
    const url = JSON.parse(line).url as string;
    expect((await fetch(`${url}/health`)).status).toBe(200);
    const sent = await fetch(`${url}/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'Hi' }),
    });
    expect(sent.status).toBe(200);

    start.child.kill('SIGTERM');
    expect(await start.exited).toBe(0);
    expect(running(pid)).toBe(false);
    expect(start.output()).toMatch(/"drainMs":\d+.*"msg":"Mailroom stopped"/);
  });

  it('npm run keys works', async () => {
    const { stdout } = await run('npm', ['run', '-s', 'keys', '--', 'list'], { cwd: dir, env: env() });
    expect(stdout).toContain('full_access');
  });

  it('npm run worker runs, and SIGTERM to npm stops npm and the worker, both with code 0', async () => {
    const worker = npm(['run', 'worker'], /delivery worker started/);
    const { pid } = await worker.started;
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(running(pid)).toBe(false);
    expect(worker.output()).toMatch(/"drainMs":\d+.*"msg":"delivery worker stopped"/);
  });
});
