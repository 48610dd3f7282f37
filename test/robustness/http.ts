// Requests as an attacker sends them: node:http with raw header pairs (so that two names differing
// only in case both go out) and raw body bytes (so that malformed JSON and odd content types do too),
// each bounded in time so that a server that hangs is reported instead of hanging the suite.
import { Agent, request } from 'node:http';

export interface RawRequest {
  method: string;
  /** Path and query, already encoded. */
  path: string;
  /** Name/value pairs, sent as given, duplicates and case included. */
  headers: [string, string][];
  body?: string | Buffer;
}

export type RawAnswer = { status: number; contentType: string | undefined; text: string; headers: Record<string, string | string[] | undefined> };

const agent = new Agent({ keepAlive: true, maxSockets: 8 });

/** How long a request may go unanswered before it counts as hung: far longer than a busy machine takes. */
export const HUNG_MS = 60_000;

/** Sends one request; resolves with the answer, or with an `error` saying why there was none. */
export function send(base: string, req: RawRequest, timeoutMs = HUNG_MS): Promise<RawAnswer | { error: string }> {
  const url = new URL(req.path, base);
  return new Promise((resolve) => {
    // With raw header pairs Node adds no Host, and a server answers a request without one 400.
    const raw = ['Host', url.host, ...req.headers.flat()];
    if (req.body !== undefined) raw.push('content-length', String(Buffer.byteLength(req.body)));
    let outgoing;
    try {
      outgoing = request({ host: url.hostname, port: url.port, method: req.method, path: url.pathname + url.search, headers: raw, agent });
    } catch (error) {
      // Node refuses to send some header bytes at all (CR, LF, NUL): nothing reached the server.
      return resolve({ error: `unsendable: ${(error as Error).message}` });
    }
    const timer = setTimeout(() => outgoing.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    outgoing.on('error', (error) => {
      clearTimeout(timer);
      resolve({ error: error.message });
    });
    outgoing.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', (error) => {
        clearTimeout(timer);
        resolve({ error: `response broke off: ${error.message}` });
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode!, contentType: res.headers['content-type'], text: Buffer.concat(chunks).toString('utf8'), headers: res.headers });
      });
      // A body cut short by the server ends with 'aborted'/'close' without 'end'.
      res.on('aborted', () => {
        clearTimeout(timer);
        resolve({ error: `response aborted after ${Buffer.concat(chunks).length} bytes` });
      });
    });
    outgoing.end(req.body);
  });
}
