// The loop every outbox runs: emails to deliver (server/delivery/worker.ts), broadcasts to fan out
// (server/broadcasts/fanout.ts) and webhook deliveries to post (server/webhooks/dispatch.ts). Each
// supplies its step (what to claim, what to do with an item, what a failure means); the lease rules
// are here and in server/store/leases.ts, the same for all three:
// - a claim takes due items for `leaseMs` under a token of its own; a worker that dies leaves them to
//   come due again when the lease runs out, so nothing is lost (at least once);
// - up to `capacity` items are in hand; the queue says when there is room to claim again;
// - the leases of the items still in hand are extended every third of a lease, for queues whose work
//   may outlast one;
// - what an item's step reads or records is tried again while the database fails and its lease lasts;
// - on stop, nothing more is claimed, the items in hand are finished, and an item whose step stopped
//   part way, or failed, is given back at once where the queue can give it back.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import { failureLevel } from '../store/database.ts';

/** What a claimed item carries: its id, and the token of the claim that holds it. */
export interface Claimed {
  id: string;
  lease_token: string;
}

/** What an item's step returns when it stopped part way: the runner gives the item back. */
export const UNFINISHED = 'unfinished';

/** An item's lease, as its step sees it. */
export interface Hold {
  /**
   * Runs `attempt`, and again after 100 ms, 200 ms... up to 2 s apart while it fails; rethrows its
   * error once the next pause would pass the lease's end as it stood at the first try (past it, the
   * item is due for any worker), or when the runner is stopping. `what` names it in the log.
   */
  persist<T>(attempt: () => Promise<T>, what: string): Promise<T>;
  /** Whether the runner is stopping: a step that can stop part way returns UNFINISHED. */
  readonly stopping: boolean;
}

export interface Queue<Item extends Claimed, Batch> {
  /** How many items to claim now, with `free` of the runner's places free and `inHand` taken; 0 waits for an item to finish. */
  room(free: number, inHand: number): number | Promise<number>;
  /** Claims up to `limit` due items for `leaseMs`. */
  claim(limit: number, now: Date, leaseMs: number): Promise<Item[]>;
  /** What a claim's items need, read once for all of them. */
  prepare?(items: Item[], hold: Hold): Promise<Batch>;
  /** Does the item's work and records its outcome. */
  work(item: Item, batch: Batch, hold: Hold): Promise<void | typeof UNFINISHED>;
  /** Extends the lease `leaseToken` holds on the items `ids` until `until`. */
  extend?(ids: string[], leaseToken: string, until: Date): Promise<void>;
  /** Gives an item back, due again at once. */
  release?(item: Item): Promise<void>;
  /** Housekeeping, every `tidyEveryMs`. */
  tidy?(): Promise<void>;
}

export interface RunnerOptions {
  /** What the log calls the work: `email delivery`, `fan-out`... */
  name: string;
  /** The log field an item's id goes in: `emailId`... */
  itemKey: string;
  leaseMs: number;
  /** The pause when nothing is due; ten of them after a failure. */
  idleMs: number;
  /** Items in hand at most. */
  capacity: number;
  /** After a claim that took fewer items than it could, the pause (at most idleMs) before the next, so that more gather. */
  gatherMs?: number;
  /** While no room is left, the queue is asked again after this long even if no item finished. */
  recheckMs?: number;
  /** Items whose work starts in one turn of the event loop, so that answers to the work already out come in between. */
  startsPerTurn?: number;
  tidyEveryMs?: number;
}

interface InHand<Item> {
  item: Item;
  leaseEnds: number;
}

export class OutboxRunner<Item extends Claimed, Batch = undefined> {
  private running: Promise<void> | undefined;
  private stopping = false;
  private readonly inHand = new Set<InHand<Item>>();
  private readonly working = new Set<Promise<unknown>>();
  /** Counts the items finished, so that a wait for the next one cannot miss one that finished meanwhile. */
  private finished = 0;
  private readonly waiting = new Set<{ wake: () => void; onFinish: boolean }>();
  private renewing: NodeJS.Timeout | undefined;
  private lastTidy = 0;
  /** No claim before this (ms), after a failure. */
  private resumeAt = 0;

  constructor(
    private readonly queue: Queue<Item, Batch>,
    private readonly logger: Logger,
    private readonly options: RunnerOptions,
  ) {}

  start(): void {
    this.running ??= this.loop();
  }

  /** Claims no more, finishes the items in hand, and stops. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const waiter of this.waiting) waiter.wake();
    await this.running;
    await Promise.allSettled(this.working);
  }

  /** Claims once, as much as the queue has room for, and works the items to the end; returns how many. Rejects if an item's work failed. */
  async runOnce(now = new Date()): Promise<number> {
    const limit = await this.queue.room(this.options.capacity - this.inHand.size, this.inHand.size);
    if (limit <= 0) return 0;
    const round = await this.claimAndStart(limit, now);
    if (!round) return 0;
    const failure = (await round.done).find((outcome) => outcome !== undefined);
    if (failure) throw failure.error;
    return round.claimed;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        if (Date.now() < this.resumeAt) {
          await this.pause(this.resumeAt - Date.now(), false);
          continue;
        }
        if (this.queue.tidy && Date.now() - this.lastTidy > (this.options.tidyEveryMs ?? Infinity)) {
          this.lastTidy = Date.now();
          await this.queue.tidy();
        }
        const finished = this.finished;
        const limit = await this.queue.room(this.options.capacity - this.inHand.size, this.inHand.size);
        if (limit <= 0) {
          if (this.inHand.size === 0) await this.pause(this.options.idleMs, false);
          else if (finished === this.finished) await this.pause(this.options.recheckMs, true);
          continue;
        }
        const round = await this.claimAndStart(limit, new Date());
        const claimed = round?.claimed ?? 0;
        if (claimed === 0) await this.pause(this.options.idleMs, false);
        else if (claimed < limit && this.options.gatherMs) await this.pause(Math.min(this.options.gatherMs, this.options.idleMs), false);
      } catch (err) {
        this.logger[failureLevel(err)]({ err }, `${this.options.name} round failed`);
        await this.pause(this.options.idleMs * 10, false);
      }
    }
  }

  /** Waits `ms` (for ever when undefined), or until the runner stops, or, with `onFinish`, until an item finishes. */
  private pause(ms: number | undefined, onFinish: boolean): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter = {
        onFinish,
        wake: () => {
          clearTimeout(timer);
          this.waiting.delete(waiter);
          resolve();
        },
      };
      if (ms !== undefined) timer = setTimeout(waiter.wake, ms);
      this.waiting.add(waiter);
    });
  }

  /**
   * Claims up to `limit` items and starts their work. `done` settles once every one has finished, with
   * the failure of each that failed (its error logged already).
   */
  private async claimAndStart(limit: number, now: Date): Promise<{ claimed: number; done: Promise<({ error: unknown } | undefined)[]> } | undefined> {
    const { leaseMs, startsPerTurn } = this.options;
    const items = await this.queue.claim(limit, now, leaseMs);
    if (items.length === 0) return undefined;
    const held = items.map((item) => ({ item, leaseEnds: now.getTime() + leaseMs }));
    for (const hand of held) this.inHand.add(hand);
    this.renew();
    let batch: Batch;
    try {
      batch = this.queue.prepare ? await this.queue.prepare(items, this.holdOf(held[0]!)) : (undefined as Batch);
    } catch (error) {
      // The claim is left to run out (or given back), as when a worker dies.
      await Promise.all(held.map((hand) => this.giveUp(hand)));
      throw error;
    }
    const outcomes: Promise<{ error: unknown } | undefined>[] = [];
    for (const [n, hand] of held.entries()) {
      if (startsPerTurn && n > 0 && n % startsPerTurn === 0) await nextTurn();
      outcomes.push(this.work(hand, batch));
    }
    return { claimed: items.length, done: Promise.all(outcomes) };
  }

  private async work(hand: InHand<Item>, batch: Batch): Promise<{ error: unknown } | undefined> {
    const working = (async () => {
      try {
        if ((await this.queue.work(hand.item, batch, this.holdOf(hand))) === UNFINISHED) await this.queue.release?.(hand.item);
        this.letGo(hand);
        return undefined;
      } catch (error) {
        this.logger[failureLevel(error)]({ err: error, [this.options.itemKey]: hand.item.id }, `${this.options.name} failed unexpectedly`);
        await this.giveUp(hand);
        return { error };
      }
    })();
    this.working.add(working);
    void working.finally(() => this.working.delete(working));
    return working;
  }

  /** An item whose work failed is given back where the queue can (else its lease runs out), and claims pause a while. */
  private async giveUp(hand: InHand<Item>): Promise<void> {
    this.resumeAt = Date.now() + this.options.idleMs * 10;
    await this.queue.release?.(hand.item).catch(() => {});
    this.letGo(hand);
  }

  /** The item is no longer in hand. */
  private letGo(hand: InHand<Item>): void {
    this.inHand.delete(hand);
    this.finished++;
    for (const waiter of this.waiting) if (waiter.onFinish) waiter.wake();
    if (this.inHand.size === 0) {
      clearInterval(this.renewing);
      this.renewing = undefined;
    }
  }

  /** While items are in hand, extends their leases every third of a lease: one statement per claim. */
  private renew(): void {
    const { extend } = this.queue;
    if (!extend || this.renewing) return;
    this.renewing = setInterval(async () => {
      const until = Date.now() + this.options.leaseMs;
      const byClaim = new Map<string, InHand<Item>[]>();
      for (const hand of this.inHand) {
        const claim = byClaim.get(hand.item.lease_token);
        if (claim) claim.push(hand);
        else byClaim.set(hand.item.lease_token, [hand]);
      }
      for (const [leaseToken, hands] of byClaim) {
        try {
          await extend.call(this.queue, hands.map((hand) => hand.item.id), leaseToken, new Date(until));
          for (const hand of hands) hand.leaseEnds = until;
        } catch (err) {
          // The lease runs out as it would have; the next extension may yet hold it.
          this.logger.warn({ err }, `extending the lease on the ${this.options.name} items in hand failed`);
        }
      }
    }, this.options.leaseMs / 3);
  }

  private holdOf(hand: InHand<Item>): Hold {
    const isStopping = () => this.stopping;
    return {
      get stopping() {
        return isStopping();
      },
      persist: async (attempt, what) => {
        const ends = hand.leaseEnds;
        for (let retry = 0; ; retry++) {
          try {
            return await attempt();
          } catch (err) {
            const pause = Math.min(2_000, 100 * 2 ** retry);
            if (this.stopping || Date.now() + pause >= ends) throw err;
            this.logger.warn({ err, [this.options.itemKey]: hand.item.id }, `${what} failed; trying again`);
            await new Promise((resolve) => setTimeout(resolve, pause));
          }
        }
      },
    };
  }
}
