// One process of the benchmark: the full Mailroom server, a bare Express 5 or node:http handler
// answering every request with a fixed body, an SMTP sink that only counts, or a delivery worker. It
// reports its own peak RSS, event-loop delay and (sink) message count when asked over IPC.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import express from 'express';
import { pino } from 'pino';
import { SMTPServer } from 'smtp-server';
import { loadConfig } from '../../server/config.ts';
import { smtpTransport } from '../../server/delivery/transport.ts';
import { DeliveryWorker } from '../../server/delivery/worker.ts';
import { startServer } from '../../server/server.ts';
import { openStore } from '../../server/store/index.ts';

const kind = process.argv[2];
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();

let received = 0;
let worker: DeliveryWorker | undefined;

async function listen(): Promise<string> {
  if (kind === 'mailroom') return (await startServer({ ...loadConfig(), port: 0 })).url;
  if (kind === 'sink') {
    const sink = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onData(stream, _session, callback) {
        stream.on('data', () => {});
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
  if (kind === 'deliver') {
    const config = loadConfig();
    const store = await openStore(config);
    worker = new DeliveryWorker(store, smtpTransport(config.smtpUrl!), pino({ level: 'warn' }), { ...config.delivery, idleMs: 20 });
    worker.start();
    return 'worker';
  }
  // The fixed bodies, by request URL, as the full server answered them.
  const bodies: Record<string, string> = JSON.parse(readFileSync(process.env.BENCH_BODIES!, 'utf8'));
  if (kind === 'express') {
    const app = express();
    app.use(express.json({ limit: '4mb' }));
    app.use((req, res) => void res.type('application/json').send(bodies[req.url]));
    return new Promise((resolve) => {
      const server = app.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
    });
  }
  const server = createServer((req, res) => {
    const body = bodies[req.url!]!;
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

const url = await listen();
process.send!({ url });
process.on('message', (message) => {
  if (message === 'reset') {
    delay.reset();
    process.send!({ reset: true });
  }
  if (message === 'stats') {
    process.send!({ peakRssBytes: process.resourceUsage().maxRSS * 1024, maxEventLoopDelayMs: delay.max / 1e6, received });
  }
  if (message === 'stop') void worker?.stop().then(() => process.exit(0));
});
