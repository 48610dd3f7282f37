// One server for the benchmark to load, in a process of its own: the full Mailroom server, or a bare
// Express 5 or node:http handler answering every request with a fixed body. It reports its own peak
// RSS and event-loop delay when asked over IPC, since those must be measured inside the server.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import express from 'express';
import { loadConfig } from '../../server/config.ts';
import { startServer } from '../../server/server.ts';

const kind = process.argv[2];
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();

async function listen(): Promise<string> {
  if (kind === 'mailroom') return (await startServer({ ...loadConfig(), port: 0 })).url;
  // The fixed bodies, by request URL, as the full server answered them.
  const bodies: Record<string, string> = JSON.parse(readFileSync(process.env.BENCH_BODIES!, 'utf8'));
  if (kind === 'express') {
    const app = express();
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
    process.send!({ peakRssBytes: process.resourceUsage().maxRSS * 1024, maxEventLoopDelayMs: delay.max / 1e6 });
  }
});
