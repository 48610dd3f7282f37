// The server as `npm start` runs it (the esbuild bundle build/main.js, which vitest's globalSetup
// builds), in a process of its own, for suites that kill it, starve it or cut its database off.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { TEST_KEY } from './server.ts';
import { WAIT_MS } from './until.ts';

const root = new URL('../..', import.meta.url).pathname;

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  /** The last 50 KB it wrote to stdout and stderr. */
  output: () => string;
  /** Resolves with the exit code (or signal name) once it has exited. */
  exited: Promise<number | string | null>;
  alive: () => boolean;
}

/**
 * Starts build/main.js with the test key, rate limiting off and the given environment; resolves once
 * it logs where it listens, rejects if it exits first, or kills it if it has not listened after
 * `timeoutMs` (a start that hangs).
 */
export function startServerProcess(env: Record<string, string>, timeoutMs = WAIT_MS): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['build/main.js'], {
    cwd: root,
    env: { ...process.env, PORT: '0', MAILROOM_API_KEY: TEST_KEY, RATE_LIMIT_PER_SECOND: '0', LOG_LEVEL: 'info', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | string | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`build/main.js did not listen within ${timeoutMs} ms: ${output.slice(-500)}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output = (output + chunk).slice(-50_000); // one log line per request: keep the tail
      const url = /"url":"([^"]+)".*Mailroom is listening/.exec(output)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve({ child, url, output: () => output, exited, alive: () => child.exitCode === null && child.signalCode === null });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`build/main.js exited (${code}) before listening: ${output.slice(-500)}`));
    });
  });
}

/** A port nothing listens on now: the system's choice, released at once. */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
