// vitest globalSetup: packs the client package once, as `npm pack` would for the registry, for the
// suites that install it (test/client-package.test.ts) or bundle it for a browser (test/browser/).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The packed client: its tarball, and a folder whose node_modules/mailroom-client is that tarball unpacked. */
    clientPackage: { tarball: string; folder: string };
  }
}

const root = new URL('../..', import.meta.url).pathname;
// npm's own variables (set when vitest runs under `npm test`) would point a nested npm at this project.
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));

export default function setup(project: TestProject): () => void {
  const folder = mkdtempSync(join(tmpdir(), 'mailroom-client-pack-'));
  const [{ filename }] = JSON.parse(execFileSync('npm', ['pack', '-w', 'client', '--pack-destination', folder, '--json'], { cwd: root, env, encoding: 'utf8' })) as { filename: string }[];
  const unpacked = join(folder, 'node_modules/mailroom-client');
  mkdirSync(unpacked, { recursive: true });
  execFileSync('tar', ['-xzf', join(folder, filename), '-C', unpacked, '--strip-components=1']);
  project.provide('clientPackage', { tarball: join(folder, filename), folder });
  return () => rmSync(folder, { recursive: true, force: true });
}
