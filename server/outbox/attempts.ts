// How often an outbox item is tried, and how long it waits between tries. Each claim counts as an
// attempt (the store adds one as it claims), so an item whose every attempt ended without an outcome
// (its workers died with it) is failed at its next claim rather than claimed for ever. The waits:
// doubling with full jitter for emails, Resend's schedule for webhooks, doubling alone for restarting
// the delivery thread (server/delivery/thread.ts).

/** The wait after the `attempt`th try failed, in ms (attempts count from 1). */
export type Backoff = (attempt: number) => number;

/** `firstMs`, doubling with each attempt, up to `maxMs`. */
export const doubling =
  ({ firstMs, maxMs }: { firstMs: number; maxMs: number }): Backoff =>
  (attempt) =>
    Math.min(maxMs, firstMs * 2 ** (attempt - 1));

/** Anywhere between none and what `backoff` says, so that items failed together do not come due together. */
export const fullJitter =
  (backoff: Backoff): Backoff =>
  (attempt) =>
    Math.random() * backoff(attempt);

/** The waits of a fixed schedule: the first after the first attempt, and so on; its last once past its end. */
export const schedule =
  (waitsMs: number[]): Backoff =>
  (attempt) =>
    waitsMs[Math.min(attempt, waitsMs.length) - 1]!;

export class Attempts {
  constructor(
    /** Tries per item. */
    readonly max: number,
    private readonly backoff: Backoff,
  ) {}

  /** Why an item claimed past its last attempt fails untried: none of them recorded an outcome. */
  spent(item: { attempts: number; last_error: string | null }): string | undefined {
    if (item.attempts <= this.max) return undefined;
    return `no outcome was recorded in ${this.max} attempts${item.last_error ? `; the last error: ${item.last_error}` : ''}`.slice(0, 500);
  }

  /** When an item whose `attempts`th try failed is tried again; undefined when that was its last. */
  retryAt(attempts: number, now = Date.now()): Date | undefined {
    return attempts >= this.max ? undefined : new Date(now + this.backoff(attempts));
  }
}
