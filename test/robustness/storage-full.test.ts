// The SQLite file's disk full, for real: DATA_DIR on a tmpfs of a few megabytes, filled by a file beside
// the database. Reads go on (a key's last use, which auth writes, is bookkeeping); writes are refused
// 503 with a Retry-After, logged with their cause rather than the failed ROLLBACK after it; whatever was
// answered 200 is stored; and once there is room again, writes are taken, without a restart.
// Mounting needs root: where the system refuses it, the suite is skipped, saying so.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-full-'));
const mounted = (() => {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'tmpfs', dataDir], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn('no tmpfs could be mounted (not root, or no CAP_SYS_ADMIN): skipping the disk-full suite');
    return false;
  }
})();

describe.skipIf(!mounted)('the SQLite disk full', () => {
  let server: TestServer;
  const filler = join(dataDir, 'filler');

  beforeAll(async () => {
    server = await startTestServer('sqlite', { config: { dataDir } });
  });
  afterAll(async () => {
    await server?.close();
    if (mounted) execFileSync('umount', [dataDir]);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const email = (n: number) => ({ from: 'a@acme.dev', to: `r${n}@example.com`, subject: `Full ${n}`, html: `<p>${'x'.repeat(50_000)}</p>` });
  const post = async (n: number) => {
    const res = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(email(n)) });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
  };

  it('answers reads, refuses writes 503 with their cause logged, keeps every email it took, and takes writes again once there is room', async () => {
    const contact = await (await server.request('/contacts', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'kept@example.com' }) })).json();
    // The key's next use is a write that auth attempts: due now, once its record is read again.
    await sql`update api_keys set last_used_at = null`.execute(server.store.database.db);
    await new Promise((resolve) => setTimeout(resolve, 1100));

    const fd = openSync(filler, 'w');
    try {
      for (;;) writeSync(fd, Buffer.alloc(64 * 1024, 1));
    } catch (error) {
      expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC');
    } finally {
      closeSync(fd);
    }

    const read = await server.request(`/contacts/${contact.id}`);
    expect(read.status).toBe(200);
    expect((await read.json()).email).toBe('kept@example.com');

    const answers = [];
    for (let n = 0; n < 40; n++) {
      const answer = await post(n);
      answers.push({ n, ...answer });
      if (answer.status === 503) break;
    }
    const refused = answers.at(-1)!;
    expect(answers.every((answer) => answer.status === 200 || answer.status === 503)).toBe(true);
    expect(refused).toMatchObject({
      status: 503,
      retryAfter: '60',
      body: { statusCode: 503, name: 'service_unavailable', message: 'The database has no room left to write; nothing was changed. Try again later.' },
    });
    const failures = server.logs.filter((line) => line.level >= 50);
    expect(failures.some((line) => line.err?.code === 'SQLITE_FULL')).toBe(true);
    expect(failures.filter((line) => /cannot rollback/.test(line.err?.message ?? ''))).toEqual([]);

    rmSync(filler);
    expect((await post(1000)).status).toBe(200);
    for (const { body } of answers.filter((answer) => answer.status === 200)) {
      expect((await server.request(`/emails/${body.id}`)).status).toBe(200);
    }
  });
});
