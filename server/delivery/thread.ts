// Keeps the delivery worker running in a thread beside the HTTP server. Whatever goes wrong in the
// thread (an error nothing caught, its database unreachable at start) stays there: the failure is
// logged, and another thread starts after a back-off that grows while threads keep dying young. Only a
// thread that says it cannot start with this configuration (its inbound port in use) is not started
// again: no restart would help, and `onCannotStart` stops the server with its reason.
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { doubling } from '../outbox/attempts.ts';

export interface Backoff {
  firstMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: Backoff = { firstMs: 1000, maxMs: 30_000 };

export interface SupervisedThread {
  /** Asks the thread to finish the messages in hand and stop; after `graceMs` it is stopped outright. */
  stop(graceMs: number): Promise<void>;
}

export function superviseThread(start: () => Worker, logger: Logger, backoff: Backoff = DEFAULT_BACKOFF, onCannotStart: (reason: string) => void = () => {}): SupervisedThread {
  let thread: Worker | undefined;
  let restart: NodeJS.Timeout | undefined;
  let stopping = false;
  let cannotStart = false;
  let failures = 0;

  const run = () => {
    const startedAt = Date.now();
    const current = start();
    thread = current;
    // Without a listener, the thread's error would be thrown in this one and end the process.
    current.on('error', (err) => logger.error({ err }, 'the delivery thread failed'));
    // Sent by server/worker.ts before it ends; it may come after the exit, so either order stops restarts.
    current.on('message', (message: { cannotStart?: string }) => {
      if (typeof message?.cannotStart !== 'string' || cannotStart) return;
      cannotStart = true;
      clearTimeout(restart);
      onCannotStart(message.cannotStart);
    });
    current.on('exit', (code) => {
      thread = undefined;
      if (stopping || cannotStart) return;
      failures = Date.now() - startedAt > backoff.maxMs ? 1 : failures + 1;
      const delayMs = doubling(backoff)(failures);
      logger.error({ code, delayMs }, 'the delivery thread stopped; starting another after a pause');
      restart = setTimeout(run, delayMs);
    });
  };
  run();

  return {
    async stop(graceMs) {
      stopping = true;
      clearTimeout(restart);
      const current = thread;
      if (!current) return;
      // Not events.once: that would reject on the thread's 'error', and the thread may yet fail as it stops.
      const exited = new Promise((resolve) => current.once('exit', resolve));
      current.postMessage('stop');
      const deadline = setTimeout(() => {
        logger.warn({ graceMs }, 'the delivery thread did not stop within the grace period; stopping it outright');
        void current.terminate();
      }, graceMs);
      await exited;
      clearTimeout(deadline);
    },
  };
}
