// The client in a real browser: the packed mailroom-client bundled for the browser with esbuild, in a page served
// from another origin (another port on 127.0.0.1), run in headless Chromium against a live server.
// With CORS_ORIGINS naming the page's origin the page creates and lists contacts, sends a batch (with
// Idempotency-Key and x-batch-validation, so a preflight) and reads the rate-limit headers; without
// it, the browser refuses the responses and the page reports a failed fetch.
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const root = new URL('../..', import.meta.url).pathname;
const present = existsSync(CHROMIUM);
if (!present) {
  if (process.env.CI === 'true') throw new Error(`no Chromium at ${CHROMIUM}, and CI=true does not allow skipping the browser test (apt-get install chromium)`);
  console.warn(`no Chromium at ${CHROMIUM}: skipping the browser test (apt-get install chromium; CI=true makes this a failure)`);
}

// The page's script, as an application would write it; its settings come from the page.
const pageJs = `import { createMailroomClient } from 'mailroom-client';
const { baseUrl, apiKey, email } = globalThis.mailroomPage;
try {
  const mailroom = createMailroomClient({ baseUrl, apiKey, retry: true });
  const created = await mailroom.contacts.create({ email });
  if (created.error) throw new Error(created.error.message);
  const listed = await mailroom.contacts.list({ limit: 10 });
  if (listed.error) throw new Error(listed.error.message);
  const batch = await mailroom.emails.sendBatch([{ from: 'a@acme.dev', to: email, subject: 'Hi', text: 'x' }, { from: 'a@acme.dev', to: 'nobody', subject: 'Hi', text: 'x' }], { validation: 'permissive' });
  if (batch.error) throw new Error(batch.error.message);
  globalThis.mailroomPage.result = {
    ok: true,
    listed: listed.data.data.map((contact) => contact.email),
    sent: batch.data.data.length,
    refused: batch.data.errors.length,
    rateLimit: listed.response.headers.get('RateLimit-Limit'),
    requestId: Boolean(listed.response.headers.get('x-request-id')),
  };
} catch (error) {
  globalThis.mailroomPage.result = { ok: false, error: String(error) };
}
`;

let bundle = '';
let browser: Browser | undefined;

beforeAll(async () => {
  if (!present) return;
  const built = await build({
    // The package as published: packed once by the global setup (test/support/client-package.ts) and unpacked
    // into a node_modules of its own; its one dependency, openapi-fetch, comes from this project's.
    stdin: { contents: pageJs, resolveDir: inject('clientPackage').folder, loader: 'js' },
    nodePaths: [join(root, 'node_modules')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    logLevel: 'silent',
  });
  bundle = built.outputFiles[0]!.text;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}, 120_000);

afterAll(() => browser?.close());

/** Serves the page and its script from 127.0.0.1 on a port of its own: another origin than the API's. */
async function servePage(settings: { baseUrl: string; apiKey: string; email: string }): Promise<{ origin: string; close(): Promise<void> }> {
  // Written per request: the settings change when a test starts another server.
  const html = () => `<!doctype html><meta charset="utf-8"><title>page</title>
<script>globalThis.mailroomPage = ${JSON.stringify(settings)};</script>
<script type="module" src="/page.js"></script>`;
  const server: Server = createServer((req, res) => {
    if (req.url === '/page.js') return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle);
    if (req.url === '/') return void res.writeHead(200, { 'content-type': 'text/html' }).end(html());
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Opens the page in a fresh context and waits for its script to report. */
async function runPage(origin: string): Promise<Record<string, unknown>> {
  const context = await browser!.newContext();
  try {
    const page = await context.newPage();
    await page.goto(`${origin}/`);
    const result = await page.waitForFunction(() => (globalThis as { mailroomPage?: { result?: unknown } }).mailroomPage?.result, undefined, { timeout: 60_000 });
    return (await result.jsonValue()) as Record<string, unknown>;
  } finally {
    await context.close();
  }
}

describe.skipIf(!present).each(backends)('the client in Chromium on %s', (backend) => {
  let page: Awaited<ReturnType<typeof servePage>>;
  let api: TestServer | undefined;
  // The page's origin must be known before the server starts, so the page comes first; its settings
  // are filled in once the server's URL is known.
  const settings = { baseUrl: '', apiKey: '', email: `browser-${backend}@example.com` };
  beforeAll(async () => {
    page = await servePage(settings);
  });
  afterAll(async () => {
    await api?.close();
    await page?.close();
  });

  const start = async (config: Parameters<typeof startTestServer>[1]) => {
    await api?.close();
    api = await startTestServer(backend, config);
    Object.assign(settings, { baseUrl: api.url, apiKey: api.apiKey });
  };

  it('creates and lists contacts, and sends, from a page on an origin CORS_ORIGINS lists', async () => {
    await start({ config: { corsOrigins: [page.origin], rateLimitPerSecond: 50 } });
    expect(await runPage(page.origin)).toEqual({ ok: true, listed: [settings.email], sent: 1, refused: 1, rateLimit: '50', requestId: true });
  }, 120_000);

  it('gets a failed fetch when CORS is off', async () => {
    await start({});
    const result = await runPage(page.origin);
    expect(result).toEqual({ ok: false, error: expect.stringMatching(/TypeError: Failed to fetch/) });
  }, 120_000);
});
