// The broadcast fan-out: claims a due broadcast and writes one outbox email per eligible contact of its
// segment, a chunk per transaction (server/store/fanout.ts), until a short chunk marks it `sent`. It
// runs wherever the delivery worker runs, in a loop of its own beside it. A worker that dies leaves its
// lease to run out; the next one resumes after the last contact written, and writes nobody twice.
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Store } from '../store/index.ts';
import { failureLevel } from '../store/database.ts';

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
  private running: Promise<void> | undefined;
  private stopping = false;

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly options: FanoutOptions = DEFAULT_FANOUT,
  ) {}

  start(): void {
    this.running ??= this.loop();
  }

  /** Finishes the chunk in hand and lets the broadcast go, for the next worker to resume at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
  }

  /**
   * Claims one due broadcast and writes its emails to the end, or until the lease is lost (it was
   * canceled, or another worker took it over) or the worker stops. Returns whether one was claimed.
   */
  async runOnce(): Promise<boolean> {
    const { chunkSize, leaseMs } = this.options;
    const held = await this.store.fanout.claim(new Date(), leaseMs);
    if (!held) return false;
    const started = performance.now();
    for (let chunks = 1; ; chunks++) {
      let outcome;
      try {
        outcome = await this.store.fanout.writeChunk(held, chunkSize, new Date(), leaseMs);
      } catch (error) {
        // Let it go for the next round rather than leave it waiting out the lease (if the database answers).
        await this.store.fanout.release(held).catch(() => {});
        throw error;
      }
      if (outcome === 'done') {
        this.logger.info({ broadcastId: held.id, chunks, ms: Math.round(performance.now() - started) }, 'broadcast fanned out');
        return true;
      }
      if (outcome === 'lost') {
        this.logger.info({ broadcastId: held.id }, 'fan-out stopped: the broadcast was canceled or another worker holds it');
        return true;
      }
      if (this.stopping) {
        await this.store.fanout.release(held);
        return true;
      }
      // Delivery shares this thread: let it (and, on SQLite, the API's writes) in between chunks.
      await yieldToEventLoop();
    }
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        if (!(await this.runOnce())) await new Promise((resolve) => setTimeout(resolve, this.options.idleMs));
      } catch (err) {
        // The lease runs out and the broadcast is claimed again, here or elsewhere, from where it got to.
        this.logger[failureLevel(err)]({ err }, 'fan-out round failed');
        await new Promise((resolve) => setTimeout(resolve, this.options.idleMs * 10));
      }
    }
  }
}
