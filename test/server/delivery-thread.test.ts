// The delivery thread's supervisor, with real threads that fail the ways a delivery thread can: an
// error nothing caught, an unhandled rejection, an exit; and one that will not stop when asked. Then
// `npm start` with two delivery threads against a real relay.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { superviseThread } from '../../server/delivery/thread.ts';
import { freePort, startServerProcess } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { startSmtpSink } from '../support/smtp.ts';
import { eventually, sleep } from './faults.ts';

function capturedLogger() {
  const lines: Record<string, any>[] = [];
  return { lines, logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }) };
}

/** A thread from source; it stops on a 'stop' message unless told to ignore it. */
const thread = (body: string) => () =>
  new Worker(`const { parentPort } = require('node:worker_threads');\n${body}`, { eval: true });
const stopsWhenAsked = "const busy = setInterval(() => {}, 1000);\nparentPort.on('message', (m) => m === 'stop' && (clearInterval(busy), parentPort.close()));";

describe('the delivery thread supervisor', () => {
  it.each([
    ['an error nothing caught', "setTimeout(() => { throw new Error('boom'); }, 10);"],
    ['an unhandled rejection', "setTimeout(() => Promise.reject(new Error('commit failed')), 10);"],
    ['an exit', 'setTimeout(() => process.exit(3), 10);'],
  ])('logs a thread that ends with %s and starts another, pausing longer each time', async (_, failure) => {
    const { lines, logger } = capturedLogger();
    let starts = 0;
    const supervised = superviseThread(
      () => (starts++, thread(`${stopsWhenAsked}\n${failure}`)()),
      logger,
      { firstMs: 20, maxMs: 10_000 },
    );
    await eventually(async () => starts >= 4, 'four threads started', 400);
    await supervised.stop(1000);
    const pauses = lines.filter((l) => l.msg.includes('starting another')).map((l) => l.delayMs);
    expect(pauses.slice(0, 3)).toEqual([20, 40, 80]);
    const afterStop = starts;
    await sleep(300);
    expect(starts).toBe(afterStop);
  });

  it('stops a thread that finishes when asked, without starting another', async () => {
    const { lines, logger } = capturedLogger();
    let starts = 0;
    const supervised = superviseThread(() => (starts++, thread(stopsWhenAsked)()), logger, { firstMs: 20, maxMs: 1000 });
    await sleep(100);
    await supervised.stop(5000);
    await sleep(100);
    expect(starts).toBe(1);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('stops a thread outright when it does not stop within the grace period', async () => {
    const { lines, logger } = capturedLogger();
    const supervised = superviseThread(thread('setInterval(() => {}, 1000);'), logger, { firstMs: 20, maxMs: 1000 });
    await sleep(100);
    await supervised.stop(200);
    expect(lines.some((l) => l.msg.includes('stopping it outright'))).toBe(true);
  });
});

describe('npm start with DELIVERY_THREADS=2', () => {
  it('delivers every email once to a real relay, from two threads, with one fan-out and one inbound listener among them', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-threads-'));
    const relay = await startSmtpSink();
    const inboundPort = await freePort();
    const server = await startServerProcess({ DATA_DIR: dataDir, SMTP_URL: relay.url, DELIVERY_THREADS: '2', INBOUND_SMTP_PORT: String(inboundPort), BOUNCE_DOMAIN: 'bounces.acme.dev' });
    try {
      const auth = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
      const ids: string[] = [];
      for (let batch = 0; batch < 6; batch++) {
        const emails = Array.from({ length: 100 }, (_, n) => ({ from: 'news@acme.dev', to: `r${batch * 100 + n}@example.com`, subject: 'x', text: 'x' }));
        const res = await fetch(`${server.url}/emails/batch`, { method: 'POST', headers: auth, body: JSON.stringify(emails) });
        expect(res.status).toBe(200);
        ids.push(...(await res.json()).data.map((email: { id: string }) => email.id));
      }
      await relay.waitFor(600, 60_000);
      await sleep(500); // a duplicate would arrive now
      const recipients = relay.received.map((message) => message.envelope.to.join());
      expect(recipients).toHaveLength(600);
      expect(new Set(recipients).size).toBe(600);
      const started = server.output().split('\n').filter((line) => line.includes('delivery worker started'));
      expect(started).toHaveLength(2);
      expect(server.output().match(/inbound SMTP listener started/g)).toHaveLength(1);
      expect(server.output()).not.toContain('EADDRINUSE');
      // Each line names its role once: a key given twice is not JSON that every reader takes alike.
      const inbound = server.output().split('\n').find((line) => line.includes('inbound SMTP listener started'))!;
      expect(inbound.match(/"role":/g)).toEqual(['"role":']);
      expect(JSON.parse(inbound).role).toBe('inbound');
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      await relay.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
