// What a thread loads to open a store, in a process of its own: the other database's driver never,
// and on PostgreSQL not Node's fetch either (pg would construct a `Response` on Node 20 to rule out
// Cloudflare Workers; see loadPg in server/store/database.ts). Each is memory in every thread that
// opens a store, the server's and each delivery thread's.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { backends, postgresSchema } from '../support/backends.ts';

const run = promisify(execFile);
const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-footprint-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Opens a store in a fresh Node process and says what that loaded. */
async function loadedByOpening(databaseUrl: string | undefined): Promise<{ fetch: boolean; pg: boolean; sqlite: boolean; navigator: boolean }> {
  const script = `
    import { createRequire } from 'node:module';
    import { openStore } from './server/store/index.ts';
    const store = await openStore({ dataDir: ${JSON.stringify(dataDir)}, databaseUrl: ${JSON.stringify(databaseUrl)} });
    await store.database.db.selectFrom('contacts').select('id').limit(1).execute();
    await store.close();
    const files = Object.keys(createRequire(import.meta.url).cache);
    console.log(JSON.stringify({
      fetch: process.moduleLoadList.some((name) => name.includes('undici')),
      pg: files.some((file) => file.includes('/node_modules/pg/')),
      sqlite: files.some((file) => file.includes('/node_modules/better-sqlite3/')),
      navigator: 'navigator' in globalThis,
    }));`;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: join(import.meta.dirname, '../..') });
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}

describe('opening a store', () => {
  it('on SQLite loads better-sqlite3, and neither pg nor fetch', async () => {
    expect(await loadedByOpening(undefined)).toEqual({ fetch: false, pg: false, sqlite: true, navigator: false });
  });

  it.runIf(backends.includes('postgres'))('on PostgreSQL loads pg, and neither better-sqlite3 nor fetch, leaving no navigator behind', async () => {
    const schema = await postgresSchema();
    try {
      expect(await loadedByOpening(schema.url)).toEqual({ fetch: false, pg: true, sqlite: false, navigator: false });
    } finally {
      await schema.drop();
    }
  });
});
