// Container tooling for the image test. No image registry is reachable here, so the Node base image
// is a stand-in built from this machine's own Node binary and the shared libraries it links, and the
// Dockerfile's build stage (npm ci, which needs the registry and a compiler) is replaced by a
// directory prepared on the host the same way, handed to the build as the `build` context.
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { productionInstall, productionPath, root } from './install.ts';

const exec = promisify(execFile);

/** crun fails here on rlimits and hybrid cgroups; runc with explicit limits does not. */
export const RUN_FLAGS = ['--runtime', 'runc', '--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024'];

export function podmanInstalled(): boolean {
  try {
    execFileSync('podman', ['--version'], { stdio: 'ignore' });
    execFileSync('buildah', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function podman(args: string[], timeoutMs = 120_000): Promise<string> {
  const { stdout } = await exec('podman', args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim();
}

/**
 * A base image with this machine's node at /usr/local/bin, the libraries `ldd` lists for it and for
 * /bin/sh, and a `node` user (uid 1000, as in the official images). Built once per Node version and
 * kept: later runs reuse it.
 */
export async function standInNodeImage(): Promise<string> {
  const tag = `localhost/mailroom-node-base:${process.version}`;
  if (await podman(['image', 'exists', tag]).then(() => true, () => false)) return tag;
  const container = execFileSync('buildah', ['from', 'scratch'], { encoding: 'utf8' }).trim();
  try {
    const mount = execFileSync('buildah', ['mount', container], { encoding: 'utf8' }).trim();
    const place = (from: string, to: string) => {
      mkdirSync(dirname(join(mount, to)), { recursive: true });
      cpSync(from, join(mount, to), { dereference: true });
    };
    place(process.execPath, '/usr/local/bin/node');
    place('/bin/sh', '/bin/sh');
    const libraries = execFileSync('ldd', [process.execPath, '/bin/sh'], { encoding: 'utf8' }).match(/\/\S+\.so[^\s]*/g) ?? [];
    for (const library of new Set(libraries)) place(library, library);
    mkdirSync(join(mount, 'etc'), { recursive: true });
    writeFileSync(join(mount, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n');
    writeFileSync(join(mount, 'etc/group'), 'root:x:0:\nnode:x:1000:\n');
    mkdirSync(join(mount, 'tmp'), { mode: 0o1777 });
    mkdirSync(join(mount, 'home/node'), { recursive: true });
    execFileSync('chown', ['1000:1000', join(mount, 'home/node')]);
    execFileSync('chmod', ['1777', join(mount, 'tmp')]);
    execFileSync('buildah', ['umount', container]);
    execFileSync('buildah', ['config', '--env', 'PATH=/usr/local/bin:/usr/bin:/bin', container]);
    execFileSync('buildah', ['commit', '-q', container, tag]);
  } finally {
    execFileSync('buildah', ['rm', container], { stdio: 'ignore' });
  }
  return tag;
}

/**
 * What the Dockerfile's build stage leaves behind (/app with production dependencies and the
 * bundle, an empty /data), made on the host: the production install, its bundle, and the same
 * pruning the build stage does.
 */
export function buildStageOnHost(): string {
  const install = productionInstall();
  execFileSync('npm', ['run', '-s', 'build'], { cwd: install, env: { ...process.env, PATH: productionPath() }, stdio: 'inherit' });
  const context = mkdtempSync(join(tmpdir(), 'mailroom-build-stage-'));
  cpSync(install, join(context, 'app'), { recursive: true, verbatimSymlinks: true });
  rmSync(install, { recursive: true, force: true });
  for (const path of ['esbuild', '@esbuild', '.bin/esbuild', 'mailroom-client', 'better-sqlite3/deps', 'better-sqlite3/src']) {
    rmSync(join(context, 'app/node_modules', path), { recursive: true, force: true });
  }
  mkdirSync(join(context, 'data'));
  return context;
}

export { root };
