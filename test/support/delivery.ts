// Delivery workers over a test server's store, to a test relay (test/support/smtp.ts) or to another
// transport, for the suites that send.
import { pino } from 'pino';
import { afterAll } from 'vitest';
import { smtpTransport, type Transport } from '../../server/delivery/transport.ts';
import { DEFAULT_DELIVERY, DeliveryWorker, type DeliveryOptions } from '../../server/delivery/worker.ts';
import type { TestServer } from './server.ts';
import type { SmtpSink } from './smtp.ts';
import { forTheBlock } from './suite.ts';

const quiet = pino({ level: 'silent' });

/** Where a worker sends: the sink, or a transport made for it. */
export type Relay = SmtpSink | (() => Transport);

/**
 * Delivery options over the defaults; and `serverLinks`, to make broadcast emails' unsubscribe URLs as
 * the test server makes them (its URL), rather than under the default public URL.
 */
export type WorkerOptions = Partial<DeliveryOptions> & { serverLinks?: boolean };

function worker(server: TestServer, relay: Relay, { serverLinks, ...options }: WorkerOptions): DeliveryWorker {
  const transport = typeof relay === 'function' ? relay() : smtpTransport(relay.url);
  return new DeliveryWorker(server.store, transport, quiet, { ...DEFAULT_DELIVERY, ...options }, serverLinks ? server.links : undefined);
}

/** One delivery worker for the describe block: made before its tests, stopped after them. */
export function withWorker(server: TestServer, relay: Relay, options: WorkerOptions = {}): DeliveryWorker {
  return forTheBlock('the delivery worker', async () => worker(server, relay, options), (started) => started.stop());
}

/**
 * Makes a fresh delivery worker on each call, for a describe block whose tests each want their own
 * (a stopped worker has closed its relay connections); each is stopped after the block's tests.
 */
export function withWorkers(server: TestServer, relay: Relay, defaults: WorkerOptions = {}): (to?: Relay, options?: WorkerOptions) => DeliveryWorker {
  const made: DeliveryWorker[] = [];
  afterAll(async () => {
    await Promise.all(made.splice(0).map((w) => w.stop()));
  });
  return (to = relay, options = {}) => {
    const w = worker(server, to, { ...defaults, ...options });
    made.push(w);
    return w;
  };
}

/** Runs one round of delivery through a worker of its own, then stops it; what the round handled. */
export async function deliverOnce(server: TestServer, relay: Relay, options: WorkerOptions = {}, now?: Date): Promise<number> {
  const w = worker(server, relay, options);
  try {
    return await w.runOnce(now);
  } finally {
    await w.stop();
  }
}
