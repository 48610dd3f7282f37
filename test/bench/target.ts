// One process of the benchmark: the full Mailroom server, a bare Express 5 or node:http handler
// answering every request with a fixed body, Express with the contract's checks and nothing else, an
// SMTP sink that only counts, a delivery worker, nodemailer alone sending pre-built messages, or one
// broadcast fan-out or webhook outbox run to its end (it reports what it measured and waits to be
// stopped). It reports its own peak RSS, event-loop delay and (sink) message count when asked over IPC.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import express from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import { createTransport } from 'nodemailer';
import { pino } from 'pino';
import { SMTPServer } from 'smtp-server';
import { validatorOptions } from '../../server/http/app.ts';
import { FanoutWorker } from '../../server/broadcasts/fanout.ts';
import { loadConfig } from '../../server/config.ts';
import { loadSpec } from '../../server/contract.ts';
import { RELAY_CONNECTIONS, smtpTransport } from '../../server/delivery/transport.ts';
import { DeliveryWorker } from '../../server/delivery/worker.ts';
import { jsonBody } from '../../server/http/jsonBody.ts';
import { startServer } from '../../server/server.ts';
import { openStore } from '../../server/store/index.ts';
import { WebhookDispatcher } from '../../server/webhooks/dispatch.ts';

const kind = process.argv[2];
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();

let received = 0;
let signed = 0;
const DKIM_HEADER = Buffer.from('DKIM-Signature:');
let worker: DeliveryWorker | undefined;

async function listen(): Promise<string> {
  // As `npm start` runs it: the webhook outbox beside the HTTP server, the delivery worker apart (`deliver`).
  if (kind === 'mailroom') return (await startServer({ ...loadConfig(), port: 0 }, { webhooks: true })).url;
  if (kind === 'sink') {
    const sink = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onData(stream, _session, callback) {
        // A signed message begins with its signature, which nodemailer's signer writes first: counted
        // so that the dkim section can tell its signed runs were signed and its unsigned ones not.
        let first = true;
        stream.on('data', (chunk: Buffer) => {
          if (first && chunk.subarray(0, DKIM_HEADER.length).equals(DKIM_HEADER)) signed++;
          first = false;
        });
        stream.on('end', () => {
          received++;
          callback();
        });
      },
    });
    sink.on('error', () => {}); // a client going away resets its connections; counting goes on
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    return `smtp://127.0.0.1:${(sink.server.address() as AddressInfo).port}`;
  }
  if (kind === 'fanout') {
    const config = loadConfig();
    const store = await openStore(config);
    const db = store.database.db;
    const fanout = new FanoutWorker(store, pino({ level: 'warn' }), config.fanout);
    const startRssBytes = process.resourceUsage().maxRSS * 1024;
    const started = performance.now();
    while (await fanout.runOnce());
    const seconds = (performance.now() - started) / 1000;
    const { n } = await db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).where('broadcast_id', 'is not', null).executeTakeFirstOrThrow();
    await store.close();
    process.send!({ recipients: Number(n), seconds, peakRssBytes: process.resourceUsage().maxRSS * 1024, startRssBytes });
    return 'fanout';
  }
  if (kind === 'webhooks') {
    const config = loadConfig();
    const store = await openStore(config);
    const db = store.database.db;
    const pending = async () => Number((await db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('state', '=', 'pending').executeTakeFirstOrThrow()).n);
    const dispatcher = new WebhookDispatcher(store, pino({ level: 'warn' }), { ...config.webhooks, idleMs: 20 });
    const started = performance.now();
    dispatcher.start();
    while ((await pending()) > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    const seconds = (performance.now() - started) / 1000;
    await dispatcher.stop();
    const { n } = await db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('state', '=', 'delivered').executeTakeFirstOrThrow();
    await store.close();
    process.send!({ delivered: Number(n), seconds, peakRssBytes: process.resourceUsage().maxRSS * 1024 });
    return 'webhooks';
  }
  if (kind === 'nodemailer') {
    // The transport's own limit: nodemailer's pooled SMTP sending messages built before the clock starts,
    // as many connections as Mailroom's relay transport opens, to the same sink.
    const { count, html } = JSON.parse(process.env.BENCH_NODEMAILER!) as { count: number; html: string };
    const builder = createTransport({ streamTransport: true, buffer: true, newline: 'windows' });
    // Plain text made with a regular expression, far cheaper than html-to-text.
    const text = html.replace(/<[^>]+>/g, '');
    const build = async (to: string) => (await builder.sendMail({ from: 'Acme <news@acme.dev>', to, subject: 'News', html, text })).message as Buffer;
    const messages: { to: string; raw: Buffer }[] = [];
    for (let n = 0; n < count; n++) {
      const to = `r${n}@example.com`;
      messages.push({ to, raw: await build(to) });
    }
    const pool = () => createTransport(`${process.env.SMTP_URL}?pool=true&maxConnections=${RELAY_CONNECTIONS}`);
    const pooled = pool();
    const started = performance.now();
    await Promise.all(messages.map(({ to, raw }) => pooled.sendMail({ envelope: { from: 'news@acme.dev', to: [to] }, raw })));
    const seconds = (performance.now() - started) / 1000;
    pooled.close();
    // Then nodemailer building each message as it sends it, from the same fields, built whole then sent
    // raw: what building with nodemailer's composer costs on top of sending, before any database. For
    // comparison: Mailroom builds its own (server/delivery/mime.ts).
    const building = pool();
    const builtAt = performance.now();
    const buildAndSend = async (to: string) => building.sendMail({ envelope: { from: 'news@acme.dev', to: [to] }, raw: await build(to) });
    await Promise.all(Array.from({ length: count }, (_, n) => buildAndSend(`r${n}@example.com`)));
    process.send!({ sent: count, seconds, buildingSeconds: (performance.now() - builtAt) / 1000 });
    building.close();
    return 'nodemailer';
  }
  if (kind === 'deliver') {
    const config = loadConfig();
    const store = await openStore(config);
    // The delivery thread of `npm start`, as a process: the webhook outbox runs in `mailroom`, as there.
    worker = new DeliveryWorker(store, smtpTransport(config.smtpUrl!), pino({ level: 'warn' }), { ...config.delivery, idleMs: 20 });
    worker.start();
    return 'worker';
  }
  // The fixed bodies, by request URL, as the full server answered them.
  const bodies: Record<string, string> = JSON.parse(readFileSync(process.env.BENCH_BODIES!, 'utf8'));
  if (kind === 'contract') {
    // What any server built on these parts pays before it does any work of its own: Express 5, the
    // body parser and express-openapi-validator's routing, request check and response check, mounted
    // and configured as createApp mounts them, answering the same bodies through res.json (which the
    // response check hooks). No auth, no database, no logging: the ceiling for the full server.
    const app = express();
    app.disable('x-powered-by');
    app.set('etag', false);
    app.use(jsonBody('4mb'));
    app.set('strict routing', true);
    app.set('case sensitive routing', true);
    app.use(OpenApiValidator.middleware(validatorOptions(loadSpec())));
    const parsed = Object.fromEntries(Object.entries(bodies).map(([path, body]) => [path, JSON.parse(body)]));
    app.use((req, res) => void res.json(parsed[req.url]));
    return listenLocally(createServer(app));
  }
  if (kind === 'express') {
    const app = express();
    app.use(express.json({ limit: '4mb' }));
    app.use((req, res) => void res.type('application/json').send(bodies[req.url]));
    return listenLocally(createServer(app));
  }
  const server = createServer((req, res) => {
    const body = bodies[req.url!]!;
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  return listenLocally(server);
}

/** Listens on a port of the system's choice on 127.0.0.1; resolves with the server's URL. */
function listenLocally(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

const url = await listen();
if (kind !== 'fanout' && kind !== 'webhooks' && kind !== 'nodemailer') process.send!({ url });
process.on('message', (message) => {
  if (message === 'reset') {
    delay.reset();
    process.send!({ reset: true });
  }
  if (message === 'stats') {
    process.send!({ peakRssBytes: process.resourceUsage().maxRSS * 1024, maxEventLoopDelayMs: delay.max / 1e6, received, signed });
  }
  if (message === 'stop') void Promise.resolve(worker?.stop()).then(() => process.exit(0));
});
// An orderly exit, so that --cpu-prof writes its profile.
process.on('SIGTERM', () => process.exit(0));
