// PostgreSQL connections lost at the worst moments, through a proxy between the server and the
// database. A send whose connection is lost as it commits: the proxy lets the COMMIT after an email's
// insert reach the database and drops the connection before its answer comes back. The server must
// not answer "nothing was changed" (503) for an email that was accepted: a caller following that
// advice sends it twice. And a start whose migrations lose their connection runs them again.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, postgresSchema } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

type Cut = 'after-commit' | 'before-commit' | RegExp;

/** A TCP proxy to PostgreSQL that can cut, once, the connection that inserts an email, or one that sends a statement. */
async function startCuttingProxy(target: URL) {
  let armed: Cut | undefined;
  let whenCut = () => {};
  let refusing = false;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    if (refusing) return client.destroy();
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    let insertedEmail = false;
    let cut = false;
    client.on('data', (chunk) => {
      const text = chunk.toString('latin1');
      if (armed && text.includes('insert into "emails"')) insertedEmail = true;
      const committing = insertedEmail && /Q[\s\S]{4}commit\0/i.test(text);
      if ((armed === 'before-commit' && committing) || (armed instanceof RegExp && armed.test(text))) {
        armed = undefined;
        cut = true;
        client.destroy();
        upstream.destroy(); // what was sent never reaches PostgreSQL: the transaction is rolled back
        whenCut();
        return;
      }
      upstream.write(chunk);
      if (armed === 'after-commit' && committing) {
        armed = undefined;
        cut = true; // PostgreSQL commits; its answer is never passed on
        setTimeout(() => {
          client.destroy();
          upstream.destroy();
          whenCut();
        }, 50);
      }
    });
    upstream.on('data', (chunk) => void (cut || client.write(chunk)));
    for (const socket of [client, upstream]) {
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    /** Cuts the next connection `how` says; resolves once it has. */
    arm: (how: Cut) =>
      new Promise<void>((resolve) => {
        armed = how;
        whenCut = resolve;
      }),
    /** Refuses new connections, and ends the open ones, until told otherwise. */
    refuse: (on: boolean) => {
      refusing = on;
      if (on) for (const socket of sockets) socket.destroy();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe.skipIf(!backends.includes('postgres'))('a send whose connection is lost as it commits (PostgreSQL)', () => {
  let proxy: Awaited<ReturnType<typeof startCuttingProxy>>;
  let server: TestServer;
  let schema: Awaited<ReturnType<typeof postgresSchema>>;

  beforeAll(async () => {
    schema = await postgresSchema();
    proxy = await startCuttingProxy(new URL(schema.url));
    const url = new URL(schema.url);
    url.host = `127.0.0.1:${proxy.port}`;
    server = await startTestServer('sqlite', { config: { databaseUrl: url.toString(), deliveryWorker: false } });
  });
  afterAll(async () => {
    await server?.close();
    await proxy?.close();
    await schema?.drop();
  });

  const send = (subject: string) =>
    server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'a@acme.dev', to: 'b@example.com', subject, text: 'x' }) });
  const stored = async (subject: string) => ((await server.api('GET', '/emails?limit=100')).data as { subject: string }[]).filter((email) => email.subject === subject).length;

  it('answers 200 with the id when the commit went through, so that nobody sends it twice', async () => {
    void proxy.arm('after-commit');
    const res = await send('committed, answer lost');
    const body = (await res.json()) as { id: string };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect((await server.request(`/emails/${body.id}`)).status).toBe(200);
    expect(await stored('committed, answer lost')).toBe(1);
  });

  it('answers 503, nothing changed, when the commit never reached the database', async () => {
    void proxy.arm('before-commit');
    const res = await send('never committed');
    expect(res.status).toBe(503);
    expect(await stored('never committed')).toBe(0);
  });

  it('says the email may have been accepted, and names it, when the database cannot be asked', async () => {
    const cut = proxy.arm('after-commit');
    const answer = send('committed, database gone');
    // Refused from the moment the connection is cut after the COMMIT: the look for the email comes later.
    await cut;
    proxy.refuse(true);
    const res = await answer;
    const body = (await res.json()) as { name: string; message: string };
    proxy.refuse(false);
    expect(res.status, JSON.stringify(body)).toBe(503);
    expect(body.name).toBe('service_unavailable');
    const id = /as `([0-9a-f-]{36})`/.exec(body.message)?.[1];
    expect(body.message).toContain('may have been accepted');
    await expect.poll(async () => (await server.request(`/emails/${id}`)).status).toBe(200);
  });

  it('starts when a connection is ended under its migrations, running them again', async () => {
    const fresh = await postgresSchema();
    const url = new URL(fresh.url);
    url.host = `127.0.0.1:${proxy.port}`;
    void proxy.arm(/create table/i);
    const second = await startTestServer('sqlite', { config: { databaseUrl: url.toString(), deliveryWorker: false } });
    try {
      expect(second.logs.some((line) => line.msg === 'database migration interrupted; running it again' && line.level === 40)).toBe(true);
      expect((await second.request('/contacts?limit=1')).status).toBe(200);
    } finally {
      await second.close();
      await fresh.drop();
    }
  });
});
