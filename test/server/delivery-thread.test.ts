// The delivery thread's supervisor, with real threads that fail the ways a delivery thread can: an
// error nothing caught, an unhandled rejection, an exit; and one that will not stop when asked.
import { Worker } from 'node:worker_threads';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { superviseThread } from '../../server/delivery/thread.ts';
import { eventually, sleep } from './faults.ts';

function capturedLogger() {
  const lines: Record<string, any>[] = [];
  return { lines, logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }) };
}

/** A thread from source; it stops on a 'stop' message unless told to ignore it. */
const thread = (body: string) => () =>
  new Worker(`const { parentPort } = require('node:worker_threads');\n${body}`, { eval: true });
const stopsWhenAsked = "const busy = setInterval(() => {}, 1000);\nparentPort.on('message', (m) => m === 'stop' && (clearInterval(busy), parentPort.close()));";

describe('finding 1: the delivery thread supervisor', () => {
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
