// The request log as a hostile client meets it: link tokens (unsubscribe and attachment download
// links work for whoever holds them) sent in every spelling a client, a mail program or a proxy can
// give a path, over a raw connection so that nothing is normalized on the way. No log line may carry
// the token, whatever the server answered; the path up to the link's name stays readable.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { rawExchange } from '../server/faults.ts';

/** Paths carrying `{t}`, the token, as each spelling puts it, and what the log should keep of them (if it logs them at all). */
const SPELLINGS: [path: string, logged?: string][] = [
  ['/unsubscribe/{t}', '/unsubscribe/…'],
  ['/unsubscribe//{t}', '/unsubscribe/…'],
  ['//unsubscribe/{t}', '/unsubscribe/…'],
  ['///unsubscribe//{t}', '/unsubscribe/…'],
  ['/unsubscribe///{t}//', '/unsubscribe/…'],
  ['/unsubscribe/{t}/', '/unsubscribe/…'],
  ['/unsubscribe/{t}/extra', '/unsubscribe/…'],
  ['/unsubscribe/%2F{t}', '/unsubscribe/…'],
  ['/unsubscribe/%252F{t}', '/unsubscribe/…'],
  ['/unsubscribe%2F{t}', '/…'],
  ['/unsubscribe%2f{t}', '/…'],
  ['/%2Funsubscribe/{t}', '/…'],
  ['/%2Funsubscribe%2F{t}', '/…'],
  ['/Unsubscribe/{t}', '/Unsubscribe/…'],
  ['/UNSUBSCRIBE//{t}', '/UNSUBSCRIBE/…'],
  ['/%75nsubscribe/{t}', '/%75nsubscribe/…'],
  ['/%2575nsubscribe/{t}', '/%2575nsubscribe/…'],
  ['/./unsubscribe/{t}', '/./unsubscribe/…'],
  ['/x/../unsubscribe/{t}', '/x/../unsubscribe/…'],
  ['/mail/unsubscribe/{t}', '/mail/unsubscribe/…'],
  ['/unsubscribe;x/{t}', '/…'],
  ['/unsubscribe%00/{t}', '/…'],
  ['/unsubscribe%20/{t}', '/…'],
  ['/unsubscribe%5C{t}', '/…'],
  ['/unsubscribe\\{t}'],
  ['/unsubscribe?{t}', '/unsubscribe/…'],
  ['/unsubscribe?token={t}', '/unsubscribe/…'],
  ['/unsubscribe/?{t}', '/unsubscribe/…'],
  ['/unsubscribe/{t}?utm_source=newsletter', '/unsubscribe/…'],
  ['/unsubscribe#{t}'],
  ['/unsubscribe/%{t}', '/unsubscribe/…'],
  ['/attachments/{t}', '/attachments/…'],
  ['/attachments//{t}', '/attachments/…'],
  ['//attachments/{t}', '/attachments/…'],
  ['/attachments/%2F{t}', '/attachments/…'],
  ['/attachments%2F{t}', '/…'],
  ['/ATTACHMENTS/{t}/', '/ATTACHMENTS/…'],
  ['http://127.0.0.1/unsubscribe//{t}', '/unsubscribe/…'],
  ['http://127.0.0.1//attachments/%2F{t}', '/attachments/…'],
];

describe('the request log, given link tokens in hostile spellings', () => {
  let server: TestServer;
  beforeAll(async () => {
    // The log is written before any store is asked: one backend shows it.
    server = await startTestServer('sqlite');
  });
  afterAll(() => server.close());

  it.each(['GET', 'POST', 'HEAD'])('never writes the token to any log line, in any spelling, for %s', async (method) => {
    for (const [spelling, logged] of SPELLINGS) {
      const token = `tok${randomUUID().replaceAll('-', '')}`;
      const path = spelling.replace('{t}', token);
      const reqId = randomUUID();
      const said = await rawExchange(server.url, `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-request-id: ${reqId}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
      expect(said, path).toMatch(/^HTTP\/1\.1 \d{3} /);
      const lines = server.logs.filter((line) => JSON.stringify(line).includes(token));
      expect(lines, `${method} ${path}`).toEqual([]);
      const line = server.logs.find((entry) => entry.reqId === reqId && entry.msg === 'request');
      if (logged !== undefined) expect(line?.url, `${method} ${path}`).toBe(logged);
    }
  });

  it('keeps the rest of a path as it came, with the values of secret-named query parameters left out', async () => {
    const reqId = randomUUID();
    await rawExchange(server.url, `GET /contacts?limit=1&api_key=re_secret123&after=x HTTP/1.1\r\nHost: 127.0.0.1\r\nx-request-id: ${reqId}\r\nConnection: close\r\n\r\n`);
    expect(server.logs.find((entry) => entry.reqId === reqId)?.url).toBe('/contacts?limit=1&api_key=…&after=x');
    const listed = randomUUID();
    await rawExchange(server.url, `GET /emails/${randomUUID()}/attachments HTTP/1.1\r\nHost: 127.0.0.1\r\nx-request-id: ${listed}\r\nConnection: close\r\n\r\n`);
    expect(server.logs.find((entry) => entry.reqId === listed)?.url).toMatch(/^\/emails\/[0-9a-f-]{36}\/attachments$/);
  });
});
