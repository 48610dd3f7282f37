// A production install of this working tree, as an operator makes one from a clean clone:
// `npm ci --omit=dev` in a directory of its own, with no dev dependency anywhere on PATH.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const root = new URL('../..', import.meta.url).pathname;

/** PATH without any node_modules/.bin (vitest runs with this repository's dev tools on it). */
export function productionPath(): string {
  return (process.env.PATH ?? '')
    .split(':')
    .filter((dir) => !dir.includes('node_modules/.bin'))
    .join(':');
}

/**
 * Copies the files git knows (committed or not, ignored ones left out) into a fresh directory and
 * runs `npm ci --omit=dev` there. Install scripts are skipped: the only one that matters,
 * better-sqlite3's native build, takes minutes, so its result is copied from this checkout's install
 * (same Node, same ABI). Packages come from npm's cache when it has them.
 */
export function productionInstall(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-production-'));
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((file) => file && !file.startsWith('test/') && existsSync(join(root, file)));
  for (const file of files) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(join(root, file), join(dir, file));
  }
  execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: dir,
    env: { ...process.env, PATH: productionPath(), NODE_ENV: 'production' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const native = 'node_modules/better-sqlite3/build/Release/better_sqlite3.node';
  mkdirSync(dirname(join(dir, native)), { recursive: true });
  cpSync(join(root, native), join(dir, native));
  return dir;
}
