// One attempt at a delivery: a POST of the signed body to the endpoint, bounded in time, following no
// redirect, reading no more of the answer than a short error message needs. Connections are kept
// alive between attempts to the same endpoint. Unless private addresses are allowed, a host is
// refused before connecting (an address literal) or as it is resolved (a name), see endpoint.ts.
//
// The request is written whole, in one write, and the answer read by answer.ts, rather than through
// node:http's client: that cost about four times the CPU per post (measured on this project's
// bench machine), most of what the outbox spends on a delivery, taken from mail delivery
// on a busy machine.
import net from 'node:net';
import tls from 'node:tls';
import { AnswerReader, type AnswerHead } from './answer.ts';
import { hostProblem, publicOnlyLookup } from './endpoint.ts';

export interface PostOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  /** TLS settings added to every https connection (tests: a certificate authority of their own). */
  tls?: tls.ConnectionOptions;
}

/** How the attempt went: the status when there was an answer, and a line for `last_error` unless it was a 2xx. */
export interface Attempt {
  status: number | null;
  error?: string;
}

/** What is read of a failure's answer, at most: enough for a line of `last_error`. */
const ANSWER_BYTES = 1024;
/** What is read of a 2xx answer, which nobody needs, to keep its connection; a longer one closes it. */
const DRAIN_BYTES = 64 * 1024;
/**
 * A kept connection idle this long is closed: sooner than the 5 s after which Node's servers, and many
 * others, close theirs, so that a post seldom meets a connection its server is closing.
 */
const IDLE_MS = 4000;
const IDLE_PER_ENDPOINT = 64;

export class WebhookPoster {
  /** Kept connections, idle, by origin. */
  private readonly idle = new Map<string, net.Socket[]>();
  private closed = false;

  constructor(private readonly options: PostOptions) {}

  async post(endpoint: string, headers: Record<string, string>, body: string): Promise<Attempt> {
    const url = new URL(endpoint);
    const refused = hostProblem(url, this.options.allowPrivate);
    if (refused) return { status: null, error: `not posted: ${refused}` };
    const request = requestOf(url, headers, body);
    const origin = `${url.protocol}//${url.host}`;
    const deadline = Date.now() + this.options.timeoutMs;
    const kept = this.idle.get(origin)?.pop();
    if (kept) {
      unkeep(kept);
      const attempt = await this.exchange(kept, origin, request, deadline, true);
      // The server closed the kept connection as the post went out: the post was not read.
      if (attempt !== 'unanswered') return attempt;
    }
    return (await this.exchange(this.connect(url), origin, request, deadline, false)) as Attempt;
  }

  close(): void {
    this.closed = true;
    for (const sockets of this.idle.values()) for (const socket of sockets) socket.destroy();
    this.idle.clear();
  }

  private connect(url: URL): net.Socket {
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const lookup = this.options.allowPrivate ? undefined : (publicOnlyLookup as net.LookupFunction);
    const socket =
      url.protocol === 'https:'
        ? tls.connect({ host, port: Number(url.port) || 443, lookup, ALPNProtocols: ['http/1.1'], ...this.options.tls })
        : net.connect({ host, port: Number(url.port) || 80, lookup });
    socket.setNoDelay(true);
    // Each exchange listens for errors while it uses the connection; one arriving between uses, or
    // after a connection is given up, must not end the process.
    socket.on('error', () => {});
    return socket;
  }

  /**
   * Writes the request on `socket` and reads the answer. Settles at a 2xx head (the rest is read in
   * the background to keep the connection) or with the error; 'unanswered' when a kept connection
   * closed before any byte of an answer.
   */
  private exchange(socket: net.Socket, origin: string, request: string, deadline: number, kept: boolean): Promise<Attempt | 'unanswered'> {
    const { timeoutMs } = this.options;
    return new Promise((resolve) => {
      let settled = false;
      let answered = 0;
      let drained = 0;
      let drainCut: NodeJS.Timeout | undefined;
      const text: Buffer[] = [];
      let textLength = 0;
      const succeeded = () => reader.head !== undefined && reader.head.status >= 200 && reader.head.status < 300;
      const settle = (attempt: Attempt | 'unanswered') => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(attempt);
      };
      const failure = (reason: string): Attempt => (reader.head ? answerError(reader.head, text) : { status: null, error: reason.slice(0, 300) });
      const finish = (keep: boolean) => {
        clearTimeout(timer);
        clearTimeout(drainCut);
        socket.off('data', onData).off('close', onClose).off('error', onError);
        if (keep && !this.closed) this.keep(origin, socket);
        else socket.destroy();
      };
      const reader = new AnswerReader({
        head: (head) => {
          if (!succeeded()) return;
          settle({ status: head.status });
          drainCut = setTimeout(() => finish(false), timeoutMs);
        },
        body: (bytes) => {
          if (succeeded()) {
            drained += bytes.length;
            if (drained > DRAIN_BYTES) throw new Error('a 2xx answer longer than is read');
          } else if (textLength < ANSWER_BYTES) {
            text.push(bytes);
            textLength += bytes.length;
          }
        },
      });
      const onData = (bytes: Buffer) => {
        answered += bytes.length;
        try {
          reader.read(bytes);
        } catch (error) {
          settle(failure((error as Error).message));
          return finish(false);
        }
        if (reader.done) {
          settle(failure(''));
          finish(reader.reusable);
        } else if (!succeeded() && textLength >= ANSWER_BYTES) {
          settle(failure(''));
          finish(false);
        }
      };
      const onClose = () => {
        if (kept && answered === 0) settle('unanswered');
        try {
          reader.closed();
          settle(failure(''));
        } catch (error) {
          settle(failure((error as Error).message));
        }
        finish(false);
      };
      const onError = (error: NodeJS.ErrnoException) => {
        if (kept && answered === 0) settle('unanswered');
        settle(failure(reasonOf(error)));
        finish(false);
      };
      const timer = setTimeout(() => {
        settle(reader.head ? answerError(reader.head, text) : { status: null, error: `no answer within ${timeoutMs} ms` });
        finish(false);
      }, Math.max(0, deadline - Date.now()));
      socket.on('data', onData).on('close', onClose).on('error', onError);
      socket.write(request);
    });
  }

  /** Keeps an answered connection for the next post to its origin, until it idles too long or its server closes it. */
  private keep(origin: string, socket: net.Socket): void {
    const sockets = this.idle.get(origin) ?? [];
    if (sockets.length >= IDLE_PER_ENDPOINT) return void socket.destroy();
    this.idle.set(origin, sockets);
    sockets.push(socket);
    const drop = () => {
      const at = sockets.indexOf(socket);
      if (at >= 0) sockets.splice(at, 1);
      socket.destroy();
    };
    // Bytes on an idle connection answer nothing that was asked: it cannot be trusted with a post.
    socket.on('data', drop).on('timeout', drop).on('close', drop).on('error', drop);
    socket.setTimeout(IDLE_MS);
    socket.unref();
    idleListeners.set(socket, drop);
  }
}

const idleListeners = new WeakMap<net.Socket, () => void>();

/** Takes a kept connection back into use. */
function unkeep(socket: net.Socket): void {
  const drop = idleListeners.get(socket)!;
  socket.off('data', drop).off('timeout', drop).off('close', drop).off('error', drop);
  socket.setTimeout(0);
  socket.ref();
}

/** The request, head and body, as one string: one write, one packet for a small payload. */
function requestOf(url: URL, headers: Record<string, string>, body: string): string {
  let head = `POST ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUser-Agent: Mailroom-Webhooks/1.0\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    if (/[\r\n]/.test(name + value)) throw new Error(`the header ${JSON.stringify(name)} would break the request's head`);
    head += `${name}: ${value}\r\n`;
  }
  return `${head}\r\n${body}`;
}

/** The `last_error` line of an answer that was not a 2xx: its status, where it redirects to, and the start of its text. */
function answerError(head: AnswerHead, text: Buffer[]): Attempt {
  const said = Buffer.concat(text).toString('utf8').slice(0, 200).replace(/\s+/g, ' ').trim();
  const where = head.status >= 300 && head.status < 400 && head.location ? ` to ${head.location.slice(0, 200)} (redirects are not followed)` : '';
  return { status: head.status, error: `HTTP ${head.status}${where}${said ? `: ${said}` : ''}` };
}

const reasonOf = (error: unknown) => {
  const { code, message } = error as NodeJS.ErrnoException;
  return String(message ?? error).slice(0, 300) || String(code);
};
