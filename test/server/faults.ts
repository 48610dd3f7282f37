// Real faults for the resilience suites: a PostgreSQL schema whose connections carry a name of their
// own (so that only they are terminated), a TCP proxy in front of PostgreSQL that can be taken down and
// brought back, a table taken away for a while, and raw HTTP clients that stall.
import { randomUUID } from 'node:crypto';
import { connect, createServer, type Socket } from 'node:net';
import pg from 'pg';
import { expect } from 'vitest';
import type { Kysely } from 'kysely';
import type { ContactRecord } from '../../server/store/contacts.ts';
import type { Tables } from '../../server/store/database.ts';
import type { Store } from '../../server/store/index.ts';
import { POSTGRES_URL, postgresSchema } from '../support/backends.ts';
import { TEST_KEY } from '../support/server.ts';
import { until, WAIT_MS } from '../support/until.ts';

/** A fresh schema whose connection URL sets an application_name that no one else uses. */
export async function namedSchema(): Promise<{ url: string; applicationName: string; drop: () => Promise<void> }> {
  const schema = await postgresSchema();
  const applicationName = `mailroom_fault_${randomUUID().slice(0, 8)}`;
  return { ...schema, url: `${schema.url}&application_name=${applicationName}`, applicationName };
}

/** Terminates the PostgreSQL backends of the connections named `applicationName`; returns how many. */
export async function terminateBackends(applicationName: string): Promise<number> {
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query('select pg_terminate_backend(pid) as done from pg_stat_activity where application_name = $1', [applicationName]);
    return rows.filter((r) => r.done).length;
  } finally {
    await admin.end();
  }
}

/** The process ids of the application's backends now. */
export async function backendPids(applicationName: string): Promise<number[]> {
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query('select pid from pg_stat_activity where application_name = $1', [applicationName]);
    return rows.map((r) => r.pid as number);
  } finally {
    await admin.end();
  }
}

export async function backendCount(applicationName: string): Promise<number> {
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query('select count(*)::int as n from pg_stat_activity where application_name = $1', [applicationName]);
    return rows[0].n;
  } finally {
    await admin.end();
  }
}

export interface PostgresProxy {
  /** `url` with host and port replaced by the proxy's. */
  via(url: string): string;
  /** Refuses new connections and cuts the open ones, as a database that went away. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  /** Stops passing bytes either way, as a server or network that hangs; thaw() passes them again. */
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

/** A TCP proxy on 127.0.0.1 in front of the PostgreSQL server that POSTGRES_URL names. */
export async function postgresProxy(): Promise<PostgresProxy> {
  const target = new URL(POSTGRES_URL);
  const sockets = new Set<Socket>();
  let frozen = false;
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
    if (frozen) for (const socket of [client, upstream]) socket.pause();
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  await listen(0);
  const port = (server.address() as { port: number }).port;
  const down = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };
  return {
    via: (url) => {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    down,
    up: () => listen(port),
    freeze: () => {
      frozen = true;
      for (const socket of sockets) socket.pause();
    },
    thaw: () => {
      frozen = false;
      for (const socket of sockets) socket.resume();
    },
    close: () => (server.listening ? down() : Promise.resolve()),
  };
}

/** A raw HTTP client that sends `request` and then reads nothing, so the server's writes back up. */
export function stalledReader(url: string, request: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.pause();
      socket.write(request, () => resolve(socket));
    });
    socket.on('error', reject);
  });
}

/** Resolves when the server closes the connection; `received` is whatever it sent meanwhile. */
export function closedByServer(socket: Socket): Promise<{ received: string }> {
  let received = '';
  socket.on('data', (chunk) => (received += chunk));
  socket.resume();
  return new Promise((resolve) => {
    if (socket.destroyed) resolve({ received });
    socket.on('close', () => resolve({ received }));
  });
}

/** A raw connection on which `sent` is written; resolves with what the server said once it closed it. */
export function rawExchange(url: string, sent: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = connect(Number(port), hostname, () => socket.write(sent));
    socket.on('data', (chunk) => (received += chunk));
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
  });
}

/** The status and JSON body of a raw HTTP/1.1 answer with a Content-Length, as `rawExchange` returns it. */
export function errorAnswer(said: string): { status: number; body: unknown } {
  const [head, body] = said.split('\r\n\r\n', 2) as [string, string];
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
  expect(head).toMatch(/\r\ncontent-type: application\/json/i);
  expect(Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1])).toBe(Buffer.byteLength(body));
  return { status, body: JSON.parse(body) };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Renames `table` away, so that every query on it fails as if the database had; call what it returns to bring it back. */
export async function takeTableAway(db: Kysely<Tables>, table: keyof Tables & string): Promise<() => Promise<void>> {
  const away = `${table}_elsewhere`;
  await db.schema.alterTable(table).renameTo(away).execute();
  return async () => {
    await db.schema.alterTable(away).renameTo(table).execute();
  };
}

/**
 * Polls `check` every `everyMs` until it returns true; gives up after `tries` polls, but never sooner
 * than WAIT_MS: on a busy machine a condition can take far longer than its polls would last.
 */
export async function eventually(check: () => Promise<boolean>, what: string, tries = 100, everyMs = 50): Promise<void> {
  await until(check, `never happened: ${what}`, Math.max(WAIT_MS, tries * everyMs), everyMs);
}

/** Contacts of about 800 bytes each: 20,000 of them are far more than socket buffers hold. */
export async function seedContacts(server: { store: Store }, count: number): Promise<void> {
  const padding = 'x'.repeat(600);
  const base = Date.parse('2026-01-01T00:00:00.000Z');
  for (let i = 0; i < count; i += 500) {
    const rows: ContactRecord[] = Array.from({ length: Math.min(500, count - i) }, (_, j) => {
      const n = i + j;
      const at = new Date(base + n * 1000).toISOString();
      return { id: randomUUID(), email: `bulk${n}@example.com`, email_key: `bulk${n}@example.com`, first_name: null, last_name: null, unsubscribed: 0, properties: JSON.stringify({ padding }), created_at: at, updated_at: at };
    });
    await server.store.database.db.insertInto('contacts').values(rows).execute();
  }
}

/** The request line and headers of an unpaginated list, with the test key. */
export const listRequest = (path = '/contacts') => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\n\r\n`;
