// A webhook receiver on 127.0.0.1 (node:http) that keeps every request it gets, and answers as the
// suite says: a status, or nothing at all (to time the sender out). Also the email and event rows a
// delivery is made of, written as the server's own transitions write them (store.events.record).
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import type { EventType } from '../../server/store/database.ts';
import type { EmailRecord } from '../../server/store/emails.ts';
import type { NewEvent } from '../../server/store/events.ts';
import type { Store } from '../../server/store/index.ts';

// The webhook suites wait on deliveries with it.
export { until } from './until.ts';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** The svix-id. */
  id: string;
  at: number;
}

/** A status to answer with, or 'hang' to answer nothing; `seen` counts earlier requests with the same svix-id. */
export type Answer = (received: Received, seen: number) => number | 'hang' | Promise<number | 'hang'>;

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  answer: Answer;
  /** The svix-ids received, each once. */
  ids(): Set<string>;
  close(): Promise<void>;
}

/** Listens on `port` (0: any free one). */
export async function startReceiver(answer: Answer = () => 200, port = 0): Promise<Receiver> {
  const received: Received[] = [];
  const counts = new Map<string, number>();
  const hanging = new Set<import('node:http').ServerResponse>();
  const receiver = { received, answer } as Receiver;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const entry = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), id: String(req.headers['svix-id']), at: Date.now() };
      received.push(entry);
      const seen = counts.get(entry.id) ?? 0;
      counts.set(entry.id, seen + 1);
      const status = await receiver.answer(entry, seen);
      if (status === 'hang') {
        hanging.add(res);
        return;
      }
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : `refused with ${status}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const bound = (server.address() as AddressInfo).port;
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${bound}/hooks`,
    port: bound,
    ids: () => new Set(received.map((r) => r.id)),
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

export interface CountingReceiver {
  url: string;
  /** The svix-ids received, each once. */
  ids: Set<string>;
  posts(): number;
  /** When the last request arrived (Date.now()). */
  lastAt(): number;
  close(): Promise<void>;
}

/**
 * A receiver for benches, which share the machine with what they measure: answers 200 at once and
 * keeps only the svix-ids it got and when the last request arrived. It reads HTTP/1.1 itself over
 * node:net (a request with a Content-Length, kept alive, as the webhook outbox sends them) rather than
 * through node:http, which cost about four times the CPU a request here (200 µs against 50): a real
 * endpoint runs on another machine and takes nothing from the two cores the bench measures Mailroom on.
 * A request it cannot read (chunked, no head within 64 KB) closes its connection, which the sender
 * counts as a failed attempt, so a mistake here shows as deliveries that never land.
 */
export async function startCountingReceiver(): Promise<CountingReceiver> {
  const ids = new Set<string>();
  let posts = 0;
  let lastAt = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket)).on('error', () => {});
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      for (;;) {
        const headEnd = pending.indexOf('\r\n\r\n');
        if (headEnd < 0) {
          if (pending.length > 65_536) socket.destroy();
          return;
        }
        const head = pending.toString('latin1', 0, headEnd);
        if (/^transfer-encoding:/im.test(head)) return void socket.destroy();
        const length = Number(/^content-length:[ \t]*(\d+)/im.exec(head)?.[1] ?? 0);
        if (pending.length < headEnd + 4 + length) return;
        pending = pending.subarray(headEnd + 4 + length);
        posts++;
        lastAt = Date.now();
        ids.add(/^svix-id:[ \t]*(\S*)/im.exec(head)?.[1] ?? 'undefined');
        socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    ids,
    posts: () => posts,
    lastAt: () => lastAt,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A port nothing listens on (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * An email a relay has taken (`sent`), as webhook events are about: not in the outbox, so that a
 * server's delivery thread does not send it again and record events of its own.
 */
export function emailRecord(overrides: Partial<EmailRecord> = {}): EmailRecord {
  const at = new Date().toISOString();
  return {
    id: randomUUID(), from_address: 'Acme <news@acme.dev>', to_addresses: JSON.stringify(['reader@example.com']), cc: null, bcc: null, reply_to: null,
    subject: 'Hello', html: '<p>Hello</p>', text: null, headers: null, tags: null, last_event: 'sent', attempts: 0, scheduled_at: null, next_attempt_at: at,
    message_id: null, last_error: null, created_at: at, updated_at: at, broadcast_id: null, contact_id: null, ...overrides,
  };
}

/** Stores the emails and records the events in one transaction, as a transition does. */
export async function recordEvents(store: Store, events: NewEvent[], emails: EmailRecord[] = []): Promise<void> {
  await store.database.db.transaction().execute(async (tx) => {
    await store.emails.insertMany(tx, emails);
    await store.events.record(tx, events);
  });
}

/** One event of `type` about `email`, with what that event adds. */
export function emailEvent(type: Extract<EventType, `email.${string}`>, email: EmailRecord, data?: unknown): NewEvent {
  return { type, email_id: email.id, data, created_at: new Date().toISOString() };
}
