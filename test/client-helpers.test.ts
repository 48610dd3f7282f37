// The client's helpers against a live server, its retries against a server that fails on purpose, and
// a browser bundle of client/.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMailroomClient } from '../client/index.ts';
import { startTestServer, type TestServer } from './support/server.ts';

describe('helpers against a live server', () => {
  let server: TestServer;
  let requests = 0;
  beforeAll(async () => {
    server = await startTestServer('sqlite');
  });
  afterAll(() => server.close());

  const client = () =>
    createMailroomClient({ apiKey: server.apiKey, baseUrl: server.url, fetch: (input, init) => (requests++, fetch(input, init)) });

  it('walks all 250 contacts newest first, 100 per request', async () => {
    const mailroom = client();
    for (let i = 0; i < 250; i++) await mailroom.contacts.create({ email: `walk${i}@example.com` });
    const { data: page } = await mailroom.contacts.list({ limit: 100 });
    requests = 0;
    const seen: string[] = [];
    for await (const contact of mailroom.contacts.listAll({ pageSize: 100 })) seen.push(contact.email);
    expect(seen).toHaveLength(250);
    expect(new Set(seen).size).toBe(250);
    expect(seen.slice(0, 100)).toEqual(page!.data.map((c) => c.email));
    expect(requests).toBe(3);
  });

  it('sends a batch strictly and permissively; only the permissive result has errors', async () => {
    const mailroom = client();
    const good = { from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'x' };
    const strict = await mailroom.emails.sendBatch([good, good]);
    expect(strict.data?.data).toHaveLength(2);
    // @ts-expect-error a strict batch result has no `errors`
    expect(strict.data?.errors).toBeUndefined();

    const permissive = await mailroom.emails.sendBatch([good, { ...good, to: 'not-an-address' }], { validation: 'permissive' });
    const errors: { index: number; message: string }[] | undefined = permissive.data?.errors;
    expect(errors).toEqual([{ index: 1, message: expect.stringContaining('`to`') }]);

    const refused = await mailroom.emails.sendBatch([{ ...good, to: 'nope' }]);
    expect(refused.error).toMatchObject({ statusCode: 422, name: 'validation_error' });
  });

  it('covers every resource: contacts, emails, broadcasts, templates', async () => {
    const mailroom = client();
    const { data: ref } = await mailroom.contacts.create({ email: 'helper@example.com', first_name: 'Hel' });
    expect((await mailroom.contacts.get('helper@example.com')).data?.id).toBe(ref!.id);
    expect((await mailroom.contacts.update(ref!.id, { unsubscribed: true })).data).toEqual(ref);
    expect((await mailroom.contacts.remove(ref!.id)).data).toMatchObject({ deleted: true });

    const { data: sent } = await mailroom.emails.send({ from: 'a@acme.dev', to: 'c@example.com', subject: 'One', text: 'x' }, { idempotencyKey: 'helpers-1' });
    expect((await mailroom.emails.get(sent!.id)).data).toMatchObject({ subject: 'One', last_event: 'queued' });

    const { data: broadcast } = await mailroom.broadcasts.create({ segment_id: '78261eea-8f8b-4381-83c6-79fa7120f1cf', from: 'a@acme.dev', subject: 'B', text: 't' });
    expect((await mailroom.broadcasts.get(broadcast!.id)).data).toMatchObject({ status: 'draft' });

    await mailroom.templates.create({ name: 'T', alias: 'helper-template', html: '<p>{{{X|y}}}</p>' });
    expect((await mailroom.templates.publish('helper-template')).data?.object).toBe('template');
    expect((await mailroom.templates.get('helper-template')).data?.status).toBe('published');
    expect((await mailroom.contacts.get('00000000-0000-4000-8000-000000000000')).error).toMatchObject({ statusCode: 404, name: 'not_found' });
    expect((await mailroom.health()).data).toEqual({ status: 'ok' });
  });

  it('takes the key from MAILROOM_API_KEY, and says so when there is none', () => {
    const saved = process.env.MAILROOM_API_KEY;
    delete process.env.MAILROOM_API_KEY;
    expect(() => createMailroomClient({ baseUrl: server.url })).toThrow(/MAILROOM_API_KEY/);
    process.env.MAILROOM_API_KEY = server.apiKey;
    expect(() => createMailroomClient({ baseUrl: server.url })).not.toThrow();
    if (saved === undefined) delete process.env.MAILROOM_API_KEY;
    else process.env.MAILROOM_API_KEY = saved;
  });
});

describe('retries', () => {
  /** Answers from a script: each entry is a status (with headers) or 'drop' to cut the connection. */
  let script: (number | 'drop')[] = [];
  const seen: { method: string; url: string; key?: string }[] = [];
  let server: Server;
  let baseUrl = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ method: req.method!, url: req.url!, key: req.headers['idempotency-key'] as string | undefined });
      const next = script.shift() ?? 200;
      if (next === 'drop') return void req.socket.destroy();
      const body = next === 200 ? (req.url === '/emails' ? { id: '4ef9a417-02e9-4d39-ad75-9611e0fcc33c' } : { object: 'list', has_more: false, data: [] }) : { statusCode: next, name: 'rate_limit_exceeded', message: 'x' };
      res.writeHead(next, { 'content-type': 'application/json', ...(next === 429 && { 'retry-after': '1' }) }).end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const run = async (answers: (number | 'drop')[], call: (c: ReturnType<typeof createMailroomClient>) => Promise<{ response?: Response }>) => {
    script = answers;
    seen.length = 0;
    const started = Date.now();
    const result = await call(createMailroomClient({ apiKey: 're_x', baseUrl, retry: { baseDelayMs: 20 } })).catch((error: Error) => ({ error }));
    return { result, ms: Date.now() - started, requests: [...seen] };
  };

  it('honours Retry-After on a 429, then succeeds', async () => {
    const { result, ms, requests } = await run([429], (c) => c.contacts.list({ limit: 5 }));
    expect((result as { response: Response }).response.status).toBe(200);
    expect(requests).toHaveLength(2);
    expect(ms).toBeGreaterThanOrEqual(950);
  });

  it('retries a send after a 503 with the same, generated Idempotency-Key', async () => {
    const { result, requests } = await run([503], (c) => c.emails.send({ from: 'a@acme.dev', to: 'b@example.com', subject: 's', text: 'x' }));
    expect((result as { response: Response }).response.status).toBe(200);
    expect(requests).toHaveLength(2);
    expect(requests[0]!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(requests[1]!.key).toBe(requests[0]!.key);
  });

  it('retries a GET after a dropped connection', async () => {
    const { result, requests } = await run(['drop'], (c) => c.contacts.list());
    expect((result as { response: Response }).response.status).toBe(200);
    expect(requests).toHaveLength(2);
  });

  it('does not retry a POST without an Idempotency-Key', async () => {
    const { result, requests } = await run([503], (c) => c.contacts.create({ email: 'x@example.com' }));
    expect((result as { response: Response }).response.status).toBe(503);
    expect(requests).toHaveLength(1);
  });

  it('gives up after the bound', async () => {
    const { result, requests } = await run([503, 503, 503, 503, 503], (c) => c.contacts.list());
    expect((result as { response: Response }).response.status).toBe(503);
    expect(requests).toHaveLength(4);
  });
});

describe('refusals that are not the contract\'s error (a proxy in front of the server)', () => {
  let server: Server;
  let baseUrl = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url!.startsWith('/contacts?')) return void res.writeHead(502, 'Bad Gateway', { 'content-type': 'text/html', 'retry-after': '5' }).end('<html><body><h1>502 Bad Gateway</h1></body></html>');
      if (req.url === '/emails') return void res.writeHead(500).end();
      res.writeHead(413, { 'content-type': 'application/json' }).end('{"error":"too big"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('gives an error in the contract\'s shape, with a message, so that `if (error)` and `error.message` work', async () => {
    const mailroom = createMailroomClient({ apiKey: 're_x', baseUrl });
    const page = await mailroom.contacts.list({ limit: 1 });
    expect(page.error).toEqual({ statusCode: 502, name: 'service_unavailable', message: 'The server answered 502 Bad Gateway, without saying why. Try again in a moment.' });
    expect(page.response.headers.get('retry-after')).toBe('5');
    const sent = await mailroom.emails.send({ from: 'a@acme.dev', to: 'b@example.com', subject: 's', text: 'x' });
    expect(sent.data).toBeUndefined();
    expect(sent.error).toEqual({ statusCode: 500, name: 'internal_server_error', message: 'The server answered 500 Internal Server Error, without saying why. Try again in a moment.' });
    const created = await mailroom.contacts.create({ email: 'x@example.com' });
    expect(created.error).toEqual({ statusCode: 413, name: 'payload_too_large', message: 'The server answered 413 Payload Too Large, without saying why.' });
  });
});

it('client/ bundles for the browser with no Node built-ins', async () => {
  const bundle = await build({ entryPoints: ['client/index.ts'], bundle: true, platform: 'browser', format: 'esm', write: false, logLevel: 'silent' });
  const code = bundle.outputFiles[0]!.text;
  expect(code).toContain('createMailroomClient');
  expect(code).not.toMatch(/from ["']node:|require\(["'](node:|fs|http|crypto)/);
});
