// The delivery worker: claims due emails from the outbox, builds each MIME message with nodemailer and
// hands it to the transport. Transient failures are retried with exponential backoff and full jitter,
// up to a bound, then the email fails; a permanent (5xx) refusal fails it at once. Plain text is made
// from the HTML here, not on the request path: html-to-text costs milliseconds per message.
import type { Logger } from 'pino';
import type { EmailRecord } from '../store/emails.ts';
import type { Store } from '../store/index.ts';
import { toMessage } from './message.ts';
import { isPermanent, type Transport } from './transport.ts';

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
}

export const DEFAULT_DELIVERY: DeliveryOptions = {
  batchSize: 100,
  leaseMs: 60_000,
  idleMs: 100,
  maxAttempts: 8,
  retryBaseMs: 2_000,
  retryMaxMs: 10 * 60_000,
};

const PURGE_EVERY_MS = 60_000;

type Delivery = Parameters<Store['emails']['markDelivered']>[0][number];

export class DeliveryWorker {
  private running: Promise<void> | undefined;
  private unrecorded: Delivery[] = [];
  private committing: Promise<void> | undefined;
  private readonly commits = new Map<Delivery, Promise<void>>();
  private stopping = false;
  private lastPurge = 0;

  constructor(
    private readonly store: Store,
    private readonly transport: Transport,
    private readonly logger: Logger,
    private readonly options: DeliveryOptions = DEFAULT_DELIVERY,
  ) {}

  start(): void {
    this.running ??= this.loop();
  }

  /** Finishes the emails in hand, then stops; unclaimed ones wait for the next worker. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
    this.transport.close();
  }

  /** Claims one batch and delivers it; returns how many emails it handled. */
  async runOnce(now = new Date()): Promise<number> {
    const emails = await this.store.emails.claimNextBatch(this.options.batchSize, now, this.options.leaseMs);
    await Promise.all(emails.map((email) => this.deliver(email)));
    return emails.length;
  }

  /**
   * Group commit: a delivery is recorded with whichever others finished while the previous commit ran.
   * One commit per email would cost more than sending it; one per claimed batch would, after a crash,
   * send the whole batch again instead of the few in flight.
   */
  private async record(delivery: Delivery): Promise<void> {
    this.unrecorded.push(delivery);
    while (!this.commits.has(delivery)) {
      if (this.committing) {
        await this.committing.catch(() => {});
        continue;
      }
      const group = this.unrecorded.splice(0);
      const commit = this.store.emails.markDelivered(group, new Date());
      this.committing = commit.finally(() => {
        this.committing = undefined;
      });
      for (const member of group) this.commits.set(member, commit);
    }
    try {
      await this.commits.get(delivery);
    } finally {
      this.commits.delete(delivery);
    }
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        if (Date.now() - this.lastPurge > PURGE_EVERY_MS) {
          this.lastPurge = Date.now();
          await this.store.idempotency.purgeExpired(new Date());
        }
        if ((await this.runOnce()) === 0) await new Promise((resolve) => setTimeout(resolve, this.options.idleMs));
      } catch (err) {
        this.logger.error({ err }, 'delivery round failed');
        await new Promise((resolve) => setTimeout(resolve, this.options.idleMs * 10));
      }
    }
  }

  private async deliver(email: EmailRecord): Promise<void> {
    const message = toMessage(email);
    let raw: string | undefined;
    try {
      ({ raw } = await this.transport.send(message));
    } catch (error) {
      const reason = String((error as Error).message ?? error).slice(0, 500);
      if (isPermanent(error) || email.attempts >= this.options.maxAttempts) {
        this.logger.warn({ emailId: email.id, attempts: email.attempts, reason }, 'delivery failed');
        await this.store.emails.markFailed(email.id, reason, new Date());
      } else {
        const ceiling = Math.min(this.options.retryMaxMs, this.options.retryBaseMs * 2 ** (email.attempts - 1));
        const retryAt = new Date(Date.now() + Math.random() * ceiling);
        this.logger.info({ emailId: email.id, attempts: email.attempts, retryAt, reason }, 'delivery delayed');
        await this.store.emails.markDelayed(email.id, reason, retryAt, new Date());
      }
      return;
    }
    // Not inside the try: a failure to record is not a failure to send. It fails the round, and the
    // email, still claimed, comes due again when its lease runs out (at least once, never lost).
    await this.record({ id: email.id, messageId: message.messageId!, text: typeof message.text === 'string' ? message.text : null, raw });
  }
}
