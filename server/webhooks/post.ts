// One attempt at a delivery: a POST of the signed body to the endpoint, bounded in time, following no
// redirect, reading no more of the answer than a short error message needs. Connections are kept
// alive between attempts to the same endpoint. Unless private addresses are allowed, a host is
// refused before connecting (an address literal) or as it is resolved (a name), see endpoint.ts.
import http from 'node:http';
import https from 'node:https';
import { hostProblem, publicOnlyLookup } from './endpoint.ts';

export interface PostOptions {
  timeoutMs: number;
  allowPrivate: boolean;
}

/** How the attempt went: the status when there was an answer, and a line for `last_error` unless it was a 2xx. */
export interface Attempt {
  status: number | null;
  error?: string;
}

/** What is read of an answer, at most: enough for a line of `last_error`. */
const ANSWER_BYTES = 1024;

export class WebhookPoster {
  private readonly agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 64 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 64 }),
  };

  constructor(private readonly options: PostOptions) {}

  async post(endpoint: string, headers: Record<string, string>, body: string): Promise<Attempt> {
    const url = new URL(endpoint);
    const refused = hostProblem(url, this.options.allowPrivate);
    if (refused) return { status: null, error: `not posted: ${refused}` };
    const agent = url.protocol === 'https:' ? this.agents['https:'] : this.agents['http:'];
    const request = url.protocol === 'https:' ? https.request : http.request;
    return new Promise<Attempt>((resolve) => {
      let settled = false;
      // Set once an answer's head arrives: a time-out then reports what the answer said so far.
      let answered: (() => void) | undefined;
      const settle = (attempt: Attempt) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(attempt);
      };
      const req = request(url, {
        method: 'POST',
        agent,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': 'Mailroom-Webhooks/1.0' },
        ...(!this.options.allowPrivate && { lookup: publicOnlyLookup as never }),
      });
      const timer = setTimeout(() => {
        if (answered) answered();
        else settle({ status: null, error: `no answer within ${this.options.timeoutMs} ms` });
        req.destroy();
      }, this.options.timeoutMs);
      req.on('error', (error) => settle({ status: null, error: reasonOf(error) }));
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          settle({ status });
          drain(res, this.options.timeoutMs);
          return;
        }
        const chunks: Buffer[] = [];
        let length = 0;
        answered = () => {
          const text = Buffer.concat(chunks).toString('utf8').slice(0, 200).replace(/\s+/g, ' ').trim();
          const where = status >= 300 && status < 400 && res.headers.location ? ` to ${String(res.headers.location).slice(0, 200)} (redirects are not followed)` : '';
          settle({ status, error: `HTTP ${status}${where}${text ? `: ${text}` : ''}` });
        };
        res.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          length += chunk.length;
          if (length >= ANSWER_BYTES) {
            answered!();
            res.destroy();
          }
        });
        res.on('end', answered);
        res.on('error', answered);
      });
      req.end(body);
    });
  }

  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}

/**
 * Reads the rest of a 2xx answer, which nobody needs, so that its connection can carry the next
 * attempt; one that runs long or trickles is cut off instead.
 */
function drain(res: http.IncomingMessage, timeoutMs: number): void {
  let length = 0;
  const cut = setTimeout(() => res.destroy(), timeoutMs);
  res.on('data', (chunk: Buffer) => {
    length += chunk.length;
    if (length > ANSWER_BYTES * 64) res.destroy();
  });
  res.on('close', () => clearTimeout(cut));
  res.on('error', () => {});
}

const reasonOf = (error: unknown) => {
  const { code, message } = error as NodeJS.ErrnoException;
  return String(message ?? error).slice(0, 300) || String(code);
};
