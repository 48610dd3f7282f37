// The broadcast fan-out: claims a due broadcast and writes one outbox email per eligible contact of its
// segment, a chunk per transaction (server/store/fanout.ts), until a short chunk marks it `sent`. It
// runs wherever the delivery worker runs, beside it, in the runner every outbox shares
// (server/outbox/runner.ts), one broadcast at a time. Each chunk renews the lease. A worker that dies
// leaves its lease to run out; the next one resumes after the last contact written, and writes nobody
// twice. One that stops, or whose chunk failed, gives the broadcast back for the next to resume at once.
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Logger } from 'pino';
import { OutboxRunner, UNFINISHED, type Hold } from '../outbox/runner.ts';
import type { HeldBroadcast } from '../store/fanout.ts';
import type { Store } from '../store/index.ts';

export interface FanoutOptions {
  /** Contacts of the segment read per transaction: larger is faster, smaller holds the write lock for less. */
  chunkSize: number;
  /** How long a claim lasts without a chunk renewing it; a worker that dies gives its broadcast up after this. */
  leaseMs: number;
  /** Pause when no broadcast is due. */
  idleMs: number;
}

export const DEFAULT_FANOUT: FanoutOptions = {
  chunkSize: 1000,
  leaseMs: 30_000,
  idleMs: 250,
};

export class FanoutWorker {
  private readonly outbox: OutboxRunner<HeldBroadcast>;

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly options: FanoutOptions = DEFAULT_FANOUT,
  ) {
    this.outbox = new OutboxRunner<HeldBroadcast>(
      {
        room: (free) => free,
        claim: async (_limit, now, leaseMs) => {
          const held = await store.fanout.claim(now, leaseMs);
          return held ? [held] : [];
        },
        work: (held, _, hold) => this.fanOut(held, hold),
        release: (held) => store.fanout.release(held),
      },
      logger,
      { name: 'fan-out', itemKey: 'broadcastId', leaseMs: options.leaseMs, idleMs: options.idleMs, capacity: 1 },
    );
  }

  start(): void {
    this.outbox.start();
  }

  /** Finishes the chunk in hand and lets the broadcast go, for the next worker to resume at once. */
  stop(): Promise<void> {
    return this.outbox.stop();
  }

  /**
   * Claims one due broadcast and writes its emails to the end, or until the lease is lost (it was
   * canceled, or another worker took it over) or the worker stops. Returns whether one was claimed.
   */
  async runOnce(): Promise<boolean> {
    return (await this.outbox.runOnce()) > 0;
  }

  private async fanOut(held: HeldBroadcast, hold: Hold): Promise<void | typeof UNFINISHED> {
    const { chunkSize, leaseMs } = this.options;
    const started = performance.now();
    for (let chunks = 1; ; chunks++) {
      const outcome = await this.store.fanout.writeChunk(held, chunkSize, new Date(), leaseMs);
      if (outcome === 'done') {
        this.logger.info({ broadcastId: held.id, chunks, ms: Math.round(performance.now() - started) }, 'broadcast fanned out');
        return;
      }
      if (outcome === 'lost') {
        this.logger.info({ broadcastId: held.id }, 'fan-out stopped: the broadcast was canceled or another worker holds it');
        return;
      }
      if (hold.stopping) return UNFINISHED;
      // Delivery shares this thread: let it (and, on SQLite, the API's writes) in between chunks.
      await yieldToEventLoop();
    }
  }
}
