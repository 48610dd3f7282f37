// One webhook post against real endpoints on 127.0.0.1 that answer with bytes written by hand: what
// the request looks like on the wire, every way HTTP/1.1 frames an answer, answers no server should
// send, endpoints that hang or hang up, kept connections and when they must not be kept, and https
// with a certificate the poster trusts or does not (test/fixtures/tls: a self-signed certificate for
// 127.0.0.1 and localhost, made for these tests only).
import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { WebhookPoster, type PostOptions } from '../../server/webhooks/post.ts';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/tls/${name}`, import.meta.url));
const OPTIONS: PostOptions = { timeoutMs: 1_000, allowPrivate: true };
const BODY = JSON.stringify({ type: 'email.sent', data: { subject: 'Grüße' } });
const HEADERS = { 'svix-id': 'msg_1', 'svix-timestamp': '1764000000', 'svix-signature': 'v1,abc=' };

interface Endpoint {
  url: string;
  /** Every request as it arrived, head and body. */
  requests: string[];
  connections: number;
}

/** An answer to one request: the bytes to write, or what to do with the connection. */
type Answer = string | ((socket: Socket, request: number) => void);

const servers: Server[] = [];
const posters: WebhookPoster[] = [];
afterEach(async () => {
  for (const poster of posters.splice(0)) poster.close();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** An endpoint that reads each request whole (head and Content-Length body) and answers it with `answer`. */
async function endpoint(answer: Answer, tlsOptions?: { key: Buffer; cert: Buffer }): Promise<Endpoint> {
  const state: Endpoint = { url: '', requests: [], connections: 0 };
  const onConnection = (socket: Socket) => {
    state.connections++;
    let pending = Buffer.alloc(0);
    socket.on('error', () => {});
    socket.on('data', (bytes: Buffer) => {
      pending = Buffer.concat([pending, bytes]);
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(pending.toString('latin1', 0, end))?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        state.requests.push(pending.toString('utf8', 0, end + 4 + length));
        pending = pending.subarray(end + 4 + length);
        if (typeof answer === 'string') socket.write(answer);
        else answer(socket, state.requests.length);
      }
    });
  };
  const server = tlsOptions ? createTlsServer(tlsOptions, onConnection) : createServer(onConnection);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  state.url = `${tlsOptions ? 'https' : 'http'}://127.0.0.1:${port}/hooks/in?team=1`;
  return state;
}

function poster(options: Partial<PostOptions> = {}): WebhookPoster {
  const made = new WebhookPoster({ ...OPTIONS, ...options });
  posters.push(made);
  return made;
}

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

describe('a webhook post', () => {
  it('writes one request with the signed headers, the host, the path and query, and the body length in bytes', async () => {
    const at = await endpoint(OK);
    expect(await poster().post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    const [request] = at.requests;
    const [head, body] = request!.split('\r\n\r\n');
    const lines = head!.split('\r\n');
    expect(lines[0]).toBe('POST /hooks/in?team=1 HTTP/1.1');
    expect(lines).toContain(`Host: ${new URL(at.url).host}`);
    expect(lines).toContain('Content-Type: application/json');
    expect(lines).toContain(`Content-Length: ${Buffer.byteLength(BODY)}`);
    for (const [name, value] of Object.entries(HEADERS)) expect(lines).toContain(`${name}: ${value}`);
    expect(body).toBe(BODY);
  });

  it('keeps the connection for the next post after a Content-Length or a chunked answer, trailers and all', async () => {
    const lengthFramed = await endpoint(OK);
    const chunked = await endpoint('HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\ntook\r\n3\r\n it\r\n0\r\nX-Trailer: 1\r\n\r\n');
    const post = poster();
    for (const at of [lengthFramed, chunked]) {
      for (let n = 0; n < 3; n++) expect((await post.post(at.url, HEADERS, BODY)).error).toBeUndefined();
      expect(at.connections).toBe(1);
      expect(at.requests).toHaveLength(3);
    }
  });

  it('skips interim answers (100, 103) and takes the final one', async () => {
    const at = await endpoint('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n');
    const post = poster();
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 204 });
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 204 });
    expect(at.connections).toBe(1);
  });

  it('reports an error status with the start of its text, unchunked, and a redirect without following it', async () => {
    const failing = await endpoint('HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nboom \r\n8\r\n  again\n\r\n0\r\n\r\n');
    expect(await poster().post(failing.url, HEADERS, BODY)).toEqual({ status: 500, error: 'HTTP 500: boom again' });
    const moved = await endpoint('HTTP/1.1 301 Moved Permanently\r\nLocation: https://elsewhere.example/hooks\r\nContent-Length: 0\r\n\r\n');
    expect(await poster().post(moved.url, HEADERS, BODY)).toEqual({ status: 301, error: 'HTTP 301 to https://elsewhere.example/hooks (redirects are not followed)' });
    expect(moved.requests).toHaveLength(1);
  });

  it('reads no more than a line of a long error answer', async () => {
    const at = await endpoint(`HTTP/1.1 503 Service Unavailable\r\nContent-Length: 10000000\r\n\r\n${'busy '.repeat(1000)}`);
    const attempt = await poster().post(at.url, HEADERS, BODY);
    expect(attempt.status).toBe(503);
    expect(attempt.error).toBe(`HTTP 503: ${'busy '.repeat(40).trim()}`);
  });

  it.each([
    ['a status line that is not HTTP/1.1', 'HTTP/2 200\r\n\r\n', /status line of "HTTP\/2 200"/],
    ['no HTTP at all', 'SSH-2.0-OpenSSH_9.6\r\n\r\n', /status line/],
    ['a Content-Length that is not a number', 'HTTP/1.1 200 OK\r\nContent-Length: 2x\r\n\r\nok', /Content-Length of "2x"/],
    ['two Content-Lengths that disagree', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok', /Content-Length of "2, 3"/],
    ['a header folded onto two lines', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 0\r\n\r\n', /header line/],
    ['a head over 16 KB', `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(17_000)}\r\n\r\n`, /head over 16384 bytes/],
    ['a switch of protocols', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n', /switch of protocols/],
  ])('fails an answer with %s', async (_, answer, reason) => {
    const at = await endpoint(answer);
    const attempt = await poster().post(at.url, HEADERS, BODY);
    expect(attempt.status).toBeNull();
    expect(attempt.error).toMatch(/^the answer is not HTTP\/1.1 this server can read/);
    expect(attempt.error).toMatch(reason);
  });

  it('takes a 2xx head as delivered even when the body that follows is broken, and then does not keep the connection', async () => {
    const at = await endpoint('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
    const post = poster();
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    expect(at.connections).toBe(2);
  });

  it.each([
    ['bytes after the answer', `${OK}HTTP/1.1 200 OK\r\n\r\n`],
    ['Connection: close', 'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'],
    ['HTTP/1.0', 'HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n'],
    ['both a Content-Length and chunks', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['a 2xx body over 64 KB', `HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n${'x'.repeat(70_000)}`],
  ])('does not use a connection again after %s', async (_, answer) => {
    const at = await endpoint(answer);
    const post = poster();
    expect(await post.post(at.url, HEADERS, BODY)).toMatchObject({ status: expect.any(Number) });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await post.post(at.url, HEADERS, BODY)).error).toBeUndefined();
    expect(at.connections).toBe(2);
  });

  it('reads a body that ends when the connection closes', async () => {
    const at = await endpoint((socket) => socket.end('HTTP/1.1 200 OK\r\n\r\nthanks'));
    expect(await poster().post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
  });

  it('drops a kept connection its server closed while idle', async () => {
    const at = await endpoint((socket) => {
      socket.write(OK);
      setTimeout(() => socket.destroy(), 20);
    });
    const post = poster();
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    expect(at.connections).toBe(2);
  });

  it('posts again on a new connection when a kept one is closed as the post goes out, and only then', async () => {
    // The second request arrives on the kept connection and the server hangs up on it unanswered.
    const at = await endpoint((socket, request) => (request === 2 ? socket.destroy() : socket.write(OK)));
    const post = poster();
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    expect(await post.post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    expect(at.connections).toBe(2);
    expect(at.requests).toHaveLength(3);
  });

  it('reports an endpoint that hangs up without answering, and one that does not answer in time', async () => {
    const hangsUp = await endpoint((socket) => socket.destroy());
    expect(await poster().post(hangsUp.url, HEADERS, BODY)).toEqual({ status: null, error: 'the answer is not HTTP/1.1 this server can read: the connection closed before an answer' });
    const silent = await endpoint(() => {});
    const started = Date.now();
    expect(await poster({ timeoutMs: 300 }).post(silent.url, HEADERS, BODY)).toEqual({ status: null, error: 'no answer within 300 ms' });
    expect(Date.now() - started).toBeLessThan(2_000);
    // An error answer that stops halfway reports what it said so far when the time is up.
    const stalls = await endpoint('HTTP/1.1 500 Oops\r\nContent-Length: 100\r\n\r\nhalf');
    expect(await poster({ timeoutMs: 300 }).post(stalls.url, HEADERS, BODY)).toEqual({ status: 500, error: 'HTTP 500: half' });
  });

  it('posts over https to a certificate it trusts, and refuses one it does not', async () => {
    const at = await endpoint(OK, { key: fixture('endpoint.key'), cert: fixture('endpoint.crt') });
    const trusting = poster({ tls: { ca: fixture('endpoint.crt') } });
    expect(await trusting.post(at.url, HEADERS, BODY)).toEqual({ status: 200 });
    expect(await trusting.post(at.url.replace('127.0.0.1', 'localhost'), HEADERS, BODY)).toEqual({ status: 200 });
    expect(at.requests[0]).toContain(BODY);
    const attempt = await poster().post(at.url, HEADERS, BODY);
    expect(attempt.status).toBeNull();
    expect(attempt.error).toMatch(/self[- ]signed certificate/);
    expect(at.requests).toHaveLength(2);
  });

  it('refuses a private address unless allowed, and a header that would break the head', async () => {
    const at = await endpoint(OK);
    expect(await poster({ allowPrivate: false }).post(at.url, HEADERS, BODY)).toEqual({ status: null, error: 'not posted: the endpoint is not https' });
    expect(await poster({ allowPrivate: false }).post(at.url.replace('http:', 'https:'), HEADERS, BODY)).toMatchObject({ error: expect.stringMatching(/^not posted: the endpoint host 127.0.0.1 is/) });
    await expect(poster().post(at.url, { 'svix-id': 'msg_1\r\nX-Injected: 1' }, BODY)).rejects.toThrow(/would break the request's head/);
    expect(at.requests).toHaveLength(0);
  });
});
