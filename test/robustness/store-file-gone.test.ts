// The SQLite file deleted under the running server, as an operator's `rm` or a backup moved over it
// would: SQLite goes on writing to the file it holds open, which the next start never opens. Once the
// server sees it (within a second), every request that needs the store is refused 503, /health too,
// rather than answered 200 for what the next restart would lose.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

describe('the SQLite file deleted while the server runs', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
  });
  afterAll(() => server?.close());

  const send = (n: number) =>
    server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'a@acme.dev', to: `r${n}@example.com`, subject: 'Hi', text: 'Hi' }) });

  it('refuses writes, reads and /health with 503 once it is gone, logging why', async () => {
    expect((await send(0)).status).toBe(200);
    for (const suffix of ['', '-wal', '-shm']) rmSync(join(server.config.dataDir, `mailroom.sqlite${suffix}`), { force: true });
    await until(async () => (await server.request('/health')).status === 503, 'the server sees the file gone');

    const refused = await send(1);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(await refused.json()).toEqual({
      statusCode: 503,
      name: 'service_unavailable',
      message: 'The database file was deleted or replaced while the server ran; nothing was changed. Try again once the operator has restored it or restarted the server.',
    });
    expect((await server.request('/contacts')).status).toBe(503);
    expect((await server.request('/health')).status).toBe(503);
    expect(server.logs.some((line) => line.level === 50 && /was deleted or replaced while the server ran/.test(line.err?.message ?? ''))).toBe(true);
  });
});
