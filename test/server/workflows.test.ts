// The Arazzo workflows under test/contract/, run by `redocly respect` against a live server on each
// store. Respect also checks every response against the bundled contract (generated/openapi.yaml) on its own.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;

describe.each(backends)('Arazzo workflows on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  it.each(['contacts', 'broadcasts'])('%s workflow passes under redocly respect', async (name) => {
    const result = await run(
      'npx',
      ['redocly', 'respect', `test/contract/${name}.arazzo.yaml`, '--server', `mailroom=${server.url}`, '--input', `apiKey=${server.apiKey}`],
      { cwd: root, env: { ...process.env, REDOCLY_TELEMETRY: 'off', NO_COLOR: '1' } },
    ).catch((error: { code: number; stdout: string }) => error);
    expect(result.stdout, result.stdout).toMatch(/Workflows: 1 passed, 1 total/);
    expect('code' in result ? result.code : 0).toBe(0);
  });
});
