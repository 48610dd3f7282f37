// Peers that stall the server: 12 clients that ask for the whole contact list (20,000
// contacts on PostgreSQL) and never read it, and slowloris clients that send their headers a byte a
// second or a body that never ends. Meanwhile everyone else must still be served, each request within
// 10 s; then SIGTERM must end the process, with exit code 0, within a bounded grace.
import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../server/store/index.ts';
import { backends, postgresSchema } from '../support/backends.ts';
import { startServerProcess, type ServerProcess } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { send } from './http.ts';

const CONTACTS = 20_000;
const STALLED = 12;
const TRICKLING = 6;
const GRACE_MS = 15_000;
const auth: [string, string][] = [['Authorization', `Bearer ${TEST_KEY}`]];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!backends.includes('postgres'))('clients that never read, and slowloris, on PostgreSQL', () => {
  let server: ServerProcess;
  let drop: () => Promise<void>;
  const sockets: Socket[] = [];
  const timers: NodeJS.Timeout[] = [];

  beforeAll(async () => {
    const schema = await postgresSchema();
    drop = schema.drop;
    const store = await openStore({ databaseUrl: schema.url, dataDir: '' });
    const at = new Date().toISOString();
    for (let i = 0; i < CONTACTS; i += 1_000) {
      const rows = Array.from({ length: 1_000 }, (_, j) => ({ id: randomUUID(), email: `s${i + j}@example.com`, email_key: `s${i + j}@example.com`, first_name: 'Stalled', last_name: null, unsubscribed: 0, properties: '{"plan":"pro"}', created_at: at, updated_at: at }));
      await store.database.db.insertInto('contacts').values(rows).execute();
    }
    await store.close();
    server = await startServerProcess({ DATABASE_URL: schema.url, DELIVERY_WORKER: 'off' });
  }, 120_000);

  afterAll(async () => {
    for (const timer of timers) clearInterval(timer);
    for (const socket of sockets) socket.destroy();
    if (server?.alive()) server.child.kill('SIGKILL');
    await server?.exited;
    await drop?.();
  });

  /** The requests everyone else makes; each must be answered within 10 s. */
  async function others(label: string): Promise<Record<string, number | string>> {
    const answers = await Promise.all([
      send(server.url, { method: 'GET', path: '/contacts?limit=10', headers: auth }, 10_000),
      send(server.url, { method: 'GET', path: '/health', headers: [] }, 10_000),
      send(server.url, { method: 'POST', path: '/emails/batch', headers: [...auth, ['Content-Type', 'application/json']], body: JSON.stringify([{ from: 'a@acme.dev', to: 'b@example.com', subject: label, text: 'x' }]) }, 10_000),
    ]);
    const [page, health, batch] = answers.map((a) => ('status' in a ? a.status : a.error));
    return { page: page!, health: health!, batch: batch! };
  }

  function open(): Promise<Socket> {
    const { hostname, port } = new URL(server.url);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => resolve(socket));
      socket.on('error', () => {}); // the server may cut them: that is its right
      socket.once('error', reject);
      sockets.push(socket);
    });
  }

  it('serves everyone else while 12 clients never read a streamed list and 12 more trickle', async () => {
    // Never read: ask for everything, and stop reading once the list has begun to come; socket buffers
    // fill and the server must wait.
    const streaming: Promise<void>[] = [];
    for (let i = 0; i < STALLED; i++) {
      const socket = await open();
      streaming.push(
        new Promise((resolve) =>
          socket.once('data', () => {
            socket.pause();
            resolve();
          }),
        ),
      );
      socket.write(`GET /contacts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\n\r\n`);
    }
    await Promise.all(streaming);
    const whileStalled = await others('stalled');

    // Slowloris: headers a byte a second, and bodies announced but never finished.
    const request = `POST /emails HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
    for (let i = 0; i < TRICKLING; i++) {
      const socket = await open();
      let at = 0;
      timers.push(setInterval(() => socket.writable && at < request.length && socket.write(request[at++]!), 1_000));
      const body = await open();
      body.write(request + '{"from":"a@acme.dev","to":');
    }
    await sleep(3_000);
    const whileTrickled = await others('trickled');

    const answered = (r: Record<string, number | string>) => Object.values(r).every((s) => typeof s === 'number' && s < 500);
    console.log(`robustness stalls: ${CONTACTS} contacts, ${STALLED} clients never reading, ${TRICKLING * 2} trickling; others while stalled ${JSON.stringify(whileStalled)}, while trickled ${JSON.stringify(whileTrickled)}`);
    expect(whileStalled).toEqual({ page: 200, health: 200, batch: 200 });
    expect(answered(whileTrickled)).toBe(true);
  });

  it(`exits 0 on SIGTERM within ${GRACE_MS / 1_000} s with those clients still connected`, async () => {
    const started = Date.now();
    server.child.kill('SIGTERM');
    const code = await Promise.race([server.exited, sleep(GRACE_MS).then(() => 'still running')]);
    console.log(`robustness stalls: SIGTERM with ${sockets.filter((s) => !s.destroyed).length} clients connected -> ${code} after ${Date.now() - started} ms`);
    expect(code).toBe(0);
  }, GRACE_MS + 10_000);
});
