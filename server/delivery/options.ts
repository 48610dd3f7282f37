// The delivery worker's settings, apart from the worker: configuration reads the defaults, and the
// HTTP server's thread, which loads configuration, then need not load the worker and nodemailer.

export interface DeliveryOptions {
  /** Emails claimed at once. */
  batchSize: number;
  /** How long a claim lasts; a worker that dies gives its emails back after this. */
  leaseMs: number;
  /** Pause when the outbox has nothing due. */
  idleMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Where bounces come back to: with it, messages carry a VERP return path and ask for DSNs. */
  bounceDomain?: string;
}

export const DEFAULT_DELIVERY: DeliveryOptions = {
  batchSize: 100,
  leaseMs: 60_000,
  idleMs: 100,
  maxAttempts: 8,
  retryBaseMs: 2_000,
  retryMaxMs: 10 * 60_000,
};
