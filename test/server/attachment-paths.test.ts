// Attachments given by `path`, as Resend takes them: fetched from a real HTTP server on 127.0.0.1 as
// the email is accepted, delivered byte for byte to a real SMTP server, and refused with a 422 naming
// the attachment when the URL cannot be fetched, or may not be (private addresses, unless allowed).
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { withWorker } from '../support/delivery.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';
import { forTheBlock } from '../support/suite.ts';
const pdf = randomBytes(200_000);
const png = randomBytes(5_000);
const BODY_LIMIT = 1_000_000;

/** Files, redirects and failures, counting the requests for each path. */
async function startFileServer(): Promise<{ url: string; hits: Map<string, number>; close: () => Promise<void> }> {
  const hits = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    hits.set(req.url!, (hits.get(req.url!) ?? 0) + 1);
    if (req.url === '/files/invoice-0042.pdf') return void res.writeHead(200, { 'content-type': 'application/pdf' }).end(pdf);
    if (req.url === '/files/R%C3%A9sum%C3%A9%201.txt') return void res.end('résumé');
    if (req.url === '/files/chart.png') return void res.end(png);
    if (req.url === '/moved') return void res.writeHead(302, { location: '/files/invoice-0042.pdf' }).end();
    if (req.url === '/loop') return void res.writeHead(301, { location: '/loop' }).end();
    if (req.url === '/slow') return; // never answers
    if (req.url === '/big') {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 1);
      for (let sent = 0; sent <= BODY_LIMIT; sent += chunk.length) res.write(chunk);
      return void res.end();
    }
    if (req.url === '/cut') {
      res.writeHead(200, { 'content-length': '1000' }).write('only part of it');
      return void setTimeout(() => res.destroy(), 50);
    }
    res.writeHead(404).end('no such file');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** The file server for the describe block. */
const withFileServer = () => forTheBlock('the file server', startFileServer, (files) => files.close());

describe.each(backends)('attachments by path on %s', (backend) => {
  const files = withFileServer();
  const server = withServer(backend, { config: { bodyLimit: String(BODY_LIMIT), attachmentPaths: { allowPrivate: true, timeoutMs: 1500 } } });
  const sink = withSink();
  const worker = withWorker(server, sink, { idleMs: 10 });

  const send = (attachments: unknown[], headers: Record<string, string> = {}) =>
    server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ from: 'Acme <team@acme.dev>', to: 'ada@example.com', subject: 'Files', html: '<p>Files <img src="cid:chart"></p>', attachments }) });

  it('fetches each file as the email is accepted, names it from its URL, and delivers its bytes', async () => {
    const res = await send([
      { path: `${files.url}/files/invoice-0042.pdf` },
      { path: `${files.url}/moved`, filename: 'copy.pdf' },
      { path: `${files.url}/files/R%C3%A9sum%C3%A9%201.txt` },
      { path: `${files.url}/files/chart.png`, content_id: 'chart' },
      { content: Buffer.from('given').toString('base64'), filename: 'given.txt' },
    ]);
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    // Kept as fetched: the listing has each file's size and type before anything is sent.
    const listed = (await (await server.request(`/emails/${id}/attachments`)).json()) as { data: { filename: string | null; size: number; content_type: string }[] };
    expect(listed.data.map(({ filename, size, content_type }) => ({ filename, size, content_type }))).toEqual([
      { filename: 'invoice-0042.pdf', size: pdf.length, content_type: 'application/pdf' },
      { filename: 'copy.pdf', size: pdf.length, content_type: 'application/pdf' },
      { filename: 'Résumé 1.txt', size: Buffer.byteLength('résumé'), content_type: 'text/plain' },
      { filename: 'chart.png', size: png.length, content_type: 'image/png' },
      { filename: 'given.txt', size: 5, content_type: 'text/plain' },
    ]);

    const received = sink.received.length;
    expect(await worker.runOnce()).toBe(1);
    await sink.waitFor(received + 1);
    const { mail } = sink.received.find((r) => r.mail.messageId === `<${id}@acme.dev>`)!;
    const named = (name: string) => mail.attachments.find((a) => a.filename === name)!;
    expect(named('invoice-0042.pdf').content.equals(pdf)).toBe(true);
    expect(named('copy.pdf').content.equals(pdf)).toBe(true);
    expect(named('Résumé 1.txt').content.toString()).toBe('résumé');
    expect(named('chart.png').content.equals(png)).toBe(true);
    expect(named('chart.png').cid).toBe('chart');
    expect(named('given.txt').content.toString()).toBe('given');
  });

  it('fetches once for a request repeated with its idempotency key', async () => {
    const path = `${files.url}/files/invoice-0042.pdf`;
    const before = files.hits.get('/files/invoice-0042.pdf') ?? 0;
    const key = { 'idempotency-key': `path-${backend}-${Date.now()}` };
    const first = await send([{ path }], key);
    const second = await send([{ path }], key);
    expect(first.status).toBe(200);
    expect(await second.json()).toEqual(await first.json());
    expect(files.hits.get('/files/invoice-0042.pdf')).toBe(before + 1);
  });

  it.each([
    ['a file that is not there', '/nope', 'it answered 404.'],
    ['more than three redirects', '/loop', 'it redirected more than 3 times.'],
    ['no answer in time', '/slow', 'the files took longer than 1500 ms (ATTACHMENT_PATH_TIMEOUT_MS).'],
    ['more bytes than a body may carry', '/big', `the files come to more than ${BODY_LIMIT} bytes together (BODY_LIMIT).`],
    ['a body cut off before its end', '/cut', 'the request failed'],
  ])('refuses %s with a 422 naming the attachment, and accepts nothing', async (_case, path, reason) => {
    const before = (await server.store.emails.page(100, {})).records.length;
    const res = await send([{ content: 'aGk=' }, { path: files.url + path }]);
    expect(res.status).toBe(422);
    const error = (await res.json()) as { name: string; message: string };
    expect(error.name).toBe('validation_error');
    expect(error.message).toContain(`The \`attachments.1.path\` could not be fetched: ${reason}`);
    expect((await server.store.emails.page(100, {})).records.length).toBe(before);
  });

  it('refuses an attachment with both a content and a path, or neither', async () => {
    const both = await send([{ content: 'aGk=', path: `${files.url}/files/invoice-0042.pdf` }]);
    expect(both.status).toBe(422);
    expect(await both.json()).toMatchObject({ name: 'validation_error', message: 'Give `attachments.0.content` or `attachments.0.path`, not both.' });
    const neither = await send([{ filename: 'a.txt' }]);
    expect(neither.status).toBe(422);
    expect(await neither.json()).toMatchObject({ name: 'missing_required_field', message: 'Missing `attachments.0.content` or `attachments.0.path` field.' });
  });

  it('refuses a path the contract\'s URL format lets through but no URL parser takes, or parsers read apart, with nothing stored', async () => {
    const before = (await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n;
    // `http:///127.0.0.1/x`: the host 127.0.0.1 to WHATWG's parser, none to RFC 3986's.
    for (const path of ['http://', 'https://', 'http://127.0.0.1:99999/x', 'http:///127.0.0.1/x']) {
      const answer = await send([{ content: 'aGk=', filename: 'a.txt' }, { path, filename: 'b.txt' }]);
      expect(answer.status, path).toBe(422);
      expect(await answer.json(), path).toEqual({ statusCode: 422, name: 'validation_error', message: 'The `attachments.1.path` must be a URL, such as `https://files.example.com/invoice.pdf`.' });
    }
    // Port 0 parses, and Node would connect to the scheme's port instead.
    expect(await (await send([{ path: 'http://127.0.0.1:0/x', filename: 'b.txt' }])).json()).toMatchObject({ statusCode: 422, message: 'The `attachments.0.path` could not be fetched: its port must be from 1 to 65535.' });
    const after = (await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n;
    expect(Number(after)).toBe(Number(before));
  });
});

describe('attachments by path, where private addresses are not allowed', () => {
  const files = withFileServer();
  const server = withServer('sqlite'); // the defaults: https on public addresses only

  it.each([
    ['plain http', (url: string) => `${url}/files/invoice-0042.pdf`, 'is not https'],
    ['a loopback address', (url: string) => `${url.replace('http:', 'https:')}/files/invoice-0042.pdf`, 'its host 127.0.0.1 is a loopback address; files are fetched only from public addresses'],
    ['localhost', () => 'https://localhost/a.pdf', 'its host localhost is this machine'],
    ['a private address in IPv6 spelling', () => 'https://[::ffff:10.0.0.1]/a.pdf', 'is a private address'],
    ['the cloud metadata address', () => 'https://169.254.169.254/latest/meta-data/', 'is a link-local address'],
  ])('refuses %s without connecting', async (_case, pathOf, reason) => {
    const res = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'team@acme.dev', to: 'ada@example.com', subject: 'x', text: 'x', attachments: [{ path: pathOf(files.url) }] }) });
    expect(res.status).toBe(422);
    const error = (await res.json()) as { message: string };
    expect(error.message).toContain('The `attachments.0.path` could not be fetched: ');
    expect(error.message).toContain(reason);
    expect(error.message).toContain('ATTACHMENT_PATH_ALLOW_PRIVATE=true');
    expect(files.hits.size).toBe(0);
  });
});
