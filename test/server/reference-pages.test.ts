// The contract and its reference page, served to anyone (no key): the bytes of the generated files in
// the repository (the bundled contract and its page), the page under a policy that keeps it from
// loading anything from elsewhere.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { specPath } from '../../server/contract.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const root = new URL('../..', import.meta.url);

describe('the reference pages', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
  });
  afterAll(async () => {
    await server.close();
  });

  it('serves the bundled contract and the docs page as they are in the repository, without a key', async () => {
    const spec = await fetch(`${server.url}/openapi.yaml`);
    expect(spec.status).toBe(200);
    expect(spec.headers.get('content-type')).toMatch(/^application\/yaml/);
    expect(await spec.text()).toBe(readFileSync(specPath, 'utf8'));

    const docs = await fetch(`${server.url}/docs`);
    expect(docs.status).toBe(200);
    expect(docs.headers.get('content-type')).toMatch(/^text\/html/);
    expect(docs.headers.get('content-security-policy')).toBe("default-src 'self' 'unsafe-inline' data: blob:; script-src 'self' 'unsafe-inline' 'unsafe-eval' blob:");
    expect(Buffer.from(await docs.arrayBuffer()).equals(readFileSync(new URL('generated/docs.html', root)))).toBe(true);
  });
});
