// The client as people install it: client/ packed with `npm pack`, the tarball installed into a project
// of its own, and used there against a live server from plain Node (ES module and CommonJS), from
// TypeScript under strict settings in every module resolution, and from a browser bundle.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { backends } from './support/backends.ts';
import { startTestServer, type TestServer } from './support/server.ts';

const root = new URL('..', import.meta.url).pathname;
const tsc = join(root, 'node_modules/.bin/tsc');
const run = promisify(execFile);
// npm's own variables (set when this runs under `npm test`) would steer the npm calls below.
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));

// One TypeScript source, compiled as an ES module (.ts in a "type": "module" project) and as CommonJS
// (.cts). It reads the key from the environment as it may be unset: exactOptionalPropertyTypes must allow it.
const consumerTs = `import { createMailroomClient, MailroomApiError, type MailroomSchemas, type OperationResult } from 'mailroom-client';

async function main(): Promise<void> {
  const baseUrl = process.env['MAILROOM_URL'];
  if (!baseUrl) throw new Error('MAILROOM_URL is not set');
  const mailroom = createMailroomClient({ baseUrl, apiKey: process.env['MAILROOM_API_KEY'], retry: true });
  const email = \`\${process.env['CONSUMER']}@example.com\`;
  const created = await mailroom.contacts.create({ email });
  if (created.error) throw new MailroomApiError(created.error);
  const found = await mailroom.contacts.get(created.data.id);
  // @ts-expect-error a contact's result is not a broadcast's
  const wrong: OperationResult<'getBroadcast'> = found;
  const contact: MailroomSchemas['Contact'] | undefined = found.data;
  const batch = await mailroom.emails.sendBatch([{ from: 'a@acme.dev', to: email, subject: 'Hi', text: 'x' }], { validation: 'permissive' });
  console.log(JSON.stringify({ email: contact?.email, sent: batch.data?.data.length, refused: batch.data?.errors.length, typed: wrong === found }));
}
main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
`;

// The same without the @ts-expect-error line: the compiler must refuse it.
const wrongTs = consumerTs.replace(/^ *\/\/ @ts-expect-error.*\n/m, '');

// Plain JavaScript, no types: the key comes from MAILROOM_API_KEY, which the client reads itself.
const consumerJs = (load: string) => `${load}
const mailroom = createMailroomClient({ baseUrl: process.env.MAILROOM_URL });
const email = process.env.CONSUMER + '@example.com';
mailroom.contacts.create({ email }).then(async ({ data, error }) => {
  if (error) throw new Error(error.message);
  const found = await mailroom.contacts.get(data.id);
  const batch = await mailroom.emails.sendBatch([{ from: 'a@acme.dev', to: email, subject: 'Hi', text: 'x' }], { validation: 'permissive' });
  console.log(JSON.stringify({ email: found.data.email, sent: batch.data.data.length, refused: batch.data.errors.length, typed: true }));
});
`;

// A page's script for the browser: no process, no Node built-ins; its settings come from the page.
const pageJs = `import { createMailroomClient } from 'mailroom-client';
const { baseUrl, apiKey } = globalThis.mailroomPage;
const mailroom = createMailroomClient({ baseUrl, apiKey });
globalThis.mailroomPage.health = (await mailroom.health()).data;
`;

const strict = { strict: true, exactOptionalPropertyTypes: true, noPropertyAccessFromIndexSignature: true, noUncheckedIndexedAccess: true };
const tsconfig = (name: string, module: string, moduleResolution: string, files: string[], lib = ['ES2022']) => ({
  compilerOptions: {
    ...strict,
    module,
    moduleResolution,
    target: 'ES2022',
    lib,
    types: ['node'],
    typeRoots: [join(root, 'node_modules/@types')],
    skipLibCheck: false,
    outDir: `out/${name}`,
  },
  files,
});
const configs = {
  node16: tsconfig('node16', 'node16', 'node16', ['consumer.ts', 'consumer.cts']),
  nodenext: tsconfig('nodenext', 'nodenext', 'nodenext', ['consumer.ts', 'consumer.cts']),
  bundler: tsconfig('bundler', 'preserve', 'bundler', ['consumer.ts'], ['ES2022', 'DOM']),
  node10: tsconfig('node10', 'commonjs', 'node10', ['consumer.cts']),
};

let dir = '';
let installed: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mailroom-client-package-'));
  // Packed once for every suite by the global setup (test/support/client-package.ts).
  const { tarball } = inject('clientPackage');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: dir, env });
  installed = readdirSync(join(dir, 'node_modules')).filter((name) => !name.startsWith('.'));

  writeFileSync(join(dir, 'consumer.ts'), consumerTs);
  writeFileSync(join(dir, 'consumer.cts'), consumerTs);
  writeFileSync(join(dir, 'wrong.ts'), wrongTs);
  writeFileSync(join(dir, 'plain.mjs'), consumerJs(`import { createMailroomClient } from 'mailroom-client';`));
  writeFileSync(join(dir, 'plain.cjs'), consumerJs(`const { createMailroomClient } = require('mailroom-client');`));
  writeFileSync(join(dir, 'page.js'), pageJs);
  for (const [name, config] of Object.entries(configs)) writeFileSync(join(dir, `tsconfig.${name}.json`), JSON.stringify(config));
  writeFileSync(join(dir, 'tsconfig.wrong.json'), JSON.stringify(tsconfig('wrong', 'node16', 'node16', ['wrong.ts'])));
}, 600_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('installs only the client and openapi-fetch: no server dependencies', () => {
  expect(installed).toContain('mailroom-client');
  expect(installed).toContain('openapi-fetch');
  for (const server of ['express', 'pg', 'better-sqlite3', 'kysely', 'nodemailer']) expect(installed).not.toContain(server);
});

it('compiles TypeScript consumers under node16, nodenext, bundler and node10 resolution, strictly', async () => {
  const names = Object.keys(configs).map((name) => `tsconfig.${name}.json`);
  const compiled = await run(tsc, ['-b', ...names], { cwd: dir }).catch((error: { stdout: string }) => error);
  expect(compiled.stdout).toBe('');
  for (const file of ['node16/consumer.js', 'node16/consumer.cjs', 'nodenext/consumer.js', 'nodenext/consumer.cjs', 'bundler/consumer.js', 'node10/consumer.cjs']) {
    expect(existsSync(join(dir, 'out', file)), file).toBe(true);
  }
}, 600_000);

it('needs the @ts-expect-error: a wrong result type fails to compile', async () => {
  const failed = await run(tsc, ['-p', 'tsconfig.wrong.json'], { cwd: dir }).then(
    () => ({ stdout: 'compiled' }),
    (error: { stdout: string }) => error,
  );
  const line = wrongTs.split('\n').findIndex((text) => text.includes('const wrong')) + 1;
  expect(failed.stdout).toMatch(new RegExp(`wrong\\.ts\\(${line},\\d+\\): error TS2322: Type .* is not assignable to type 'OperationResult<"getBroadcast">'`));
}, 600_000);

it('bundles for the browser with no Node built-ins', async () => {
  const bundle = await build({ entryPoints: [join(dir, 'page.js')], absWorkingDir: dir, bundle: true, platform: 'browser', format: 'esm', write: false, logLevel: 'silent' });
  const code = bundle.outputFiles[0]!.text;
  expect(code).toContain('Authorization');
  expect(code).not.toMatch(/["']node:|require\(/);
  writeFileSync(join(dir, 'page.bundle.mjs'), code);
});

describe.each(backends)('against a live server on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend, { config: { rateLimitPerSecond: 0 } });
  });
  afterAll(() => server?.close());

  const consumers = ['plain.mjs', 'plain.cjs', 'out/node16/consumer.js', 'out/node16/consumer.cjs', 'out/nodenext/consumer.js', 'out/nodenext/consumer.cjs', 'out/bundler/consumer.js', 'out/node10/consumer.cjs'];
  it.each(consumers)('%s creates a contact, reads it back and sends a batch', async (file) => {
    const name = file.replace(/\W+/g, '-');
    const { stdout } = await run(process.execPath, [file], { cwd: dir, env: { ...env, MAILROOM_URL: server.url, MAILROOM_API_KEY: server.apiKey, CONSUMER: name } });
    expect(JSON.parse(stdout)).toEqual({ email: `${name}@example.com`, sent: 1, refused: 0, typed: true });
  });

  it('the browser bundle calls the API', async () => {
    const page = `globalThis.mailroomPage = ${JSON.stringify({ baseUrl: server.url, apiKey: server.apiKey })};
await import('./page.bundle.mjs');
console.log(JSON.stringify(globalThis.mailroomPage.health));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', page], { cwd: dir, env });
    expect(JSON.parse(stdout)).toEqual({ status: 'ok' });
  });
});
