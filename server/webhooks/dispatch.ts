// The webhook outbox worker: claims due deliveries (server/store/webhookDeliveries.ts), posts each,
// signed, to its endpoint, and records how it went. Up to `concurrency` posts are in flight at once,
// in no particular order, each enabled webhook holding an equal share of them at most. A delivery
// that fails is tried again on Resend's schedule with the same `svix-id`, then ends `failed`; a
// webhook whose deliveries keep failing every attempt is disabled.
// Ended deliveries are deleted once older than `keepEndedMs` (WEBHOOK_KEEP_DAYS, 30 days by default).
// `npm start` runs it in the HTTP server's thread (server/server.ts), `npm run worker` beside the
// delivery worker (server/worker.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { GroupCommit } from '../store/groupCommit.ts';
import type { Store } from '../store/index.ts';
import { retryWhileClaimed } from '../store/retryWhileClaimed.ts';
import type { ClaimedDelivery, DeliveryContext, DeliveryOutcome } from '../store/webhookDeliveries.ts';
import { failureLevel } from '../store/database.ts';
import { payloadOf } from './payload.ts';
import { WebhookPoster } from './post.ts';
import { signedHeaders } from './signature.ts';

export interface WebhookOptions {
  /** Whether endpoints may be plain http, or on private, loopback and other non-public addresses. */
  allowPrivate: boolean;
  /** How long one attempt may take, from connecting to the answer's head. */
  timeoutMs: number;
  /** The waits before the second, third... attempt: a delivery gets one attempt more than it has entries. */
  retryScheduleMs: number[];
  /** How long a claim lasts; a worker that dies gives its deliveries back after this. */
  leaseMs: number;
  /** Posts in flight at once. */
  concurrency: number;
  /** Pause when nothing is due. */
  idleMs: number;
  /** A webhook is disabled after this many deliveries in a row failed every attempt; 0 never. */
  disableAfterFailed: number;
  /** How long a delivery is kept once it has ended, delivered or failed. */
  keepEndedMs: number;
}

export const DEFAULT_WEBHOOKS: WebhookOptions = {
  allowPrivate: false,
  timeoutMs: 10_000,
  // Resend's: at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h.
  retryScheduleMs: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
  leaseMs: 60_000,
  concurrency: 50,
  idleMs: 250,
  disableAfterFailed: 5,
  keepEndedMs: 30 * 24 * 3600_000,
};

/** How long a caught-up worker waits before claiming again; a webhook arrives this much later at most. */
const GATHER_MS = 100;
/** How long the list of enabled webhooks is used before it is read again. */
const WEBHOOKS_FRESH_MS = 1000;
/** How often ended deliveries past keeping are deleted. */
const PURGE_EVERY_MS = 60_000;

export class WebhookDispatcher {
  private running: Promise<void> | undefined;
  private stopping = false;
  private lastPurge = 0;
  private readonly inFlight = new Set<Promise<void>>();
  /** Posts in flight, by webhook. */
  private readonly postingTo = new Map<string, number>();
  /** The enabled webhooks, as last read, and when. */
  private webhookIds: string[] = [];
  private webhooksReadAt = -Infinity;
  /** Which webhook the next claim serves first, in turn, for when free slots are fewer than their shares. */
  private turn = 0;
  private readonly poster: WebhookPoster;
  /** Outcomes are recorded in groups, as the email outbox's are: a busy endpoint costs a transaction per group rather than per delivery. */
  private readonly outcomes = new GroupCommit<DeliveryOutcome>((group) => this.store.webhookDeliveries.record(group, new Date()), {
    size: 50,
    gatherMs: 50,
    nextAnswerMs: 5,
  });

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly options: WebhookOptions = DEFAULT_WEBHOOKS,
  ) {
    this.poster = new WebhookPoster(options);
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Finishes the posts in flight and records them, then stops; unclaimed deliveries wait for the next worker. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
    this.poster.close();
  }

  /** Claims as many due deliveries as each webhook has free slots for and starts posting them; returns how many. */
  async runOnce(now = new Date()): Promise<number> {
    await this.readWebhooks();
    const limits = this.claimLimits();
    this.turn++;
    if (limits.size === 0) return 0;
    const claimed = await this.store.webhookDeliveries.claimDue(limits, now, this.options.leaseMs);
    if (claimed.length === 0) return 0;
    // Read again while the claim lasts if the database fails meanwhile: a round that gave up here
    // would leave the deliveries claimed and unposted until their lease ran out.
    const contexts = await this.persist(claimed[0]!, () => this.store.webhookDeliveries.contextOf(claimed.map((d) => d.id)), 'reading what claimed deliveries need');
    for (const delivery of claimed) {
      // The database out of reach as the worker stops is a warning, as everywhere: the lease runs out and the delivery is posted again.
      const posting = this.deliver(delivery, contexts.get(delivery.id)).catch((err) => this.logger[failureLevel(err)]({ err, deliveryId: delivery.id }, 'webhook delivery failed unexpectedly'));
      const webhookId = delivery.webhook_id;
      this.inFlight.add(posting);
      this.postingTo.set(webhookId, (this.postingTo.get(webhookId) ?? 0) + 1);
      void posting.finally(() => {
        this.inFlight.delete(posting);
        const left = this.postingTo.get(webhookId)! - 1;
        if (left > 0) this.postingTo.set(webhookId, left);
        else this.postingTo.delete(webhookId);
      });
    }
    return claimed.length;
  }

  /** The post slots each webhook may use: an equal share of them all. */
  private share(): number {
    return Math.max(1, Math.floor(this.options.concurrency / Math.max(1, this.webhookIds.length)));
  }

  /**
   * How many due deliveries of each webhook a claim may take now: its share of the slots less its
   * posts in flight, while free slots last (100 a claim at most). So an endpoint that hangs, or is
   * slow, holds its share of the slots at most, and the other webhooks' events go on being posted.
   */
  private claimLimits(): Map<string, number> {
    const ids = this.webhookIds;
    const share = this.share();
    let free = Math.min(this.options.concurrency - this.inFlight.size, 100);
    const limits = new Map<string, number>();
    for (let i = 0; i < ids.length && free > 0; i++) {
      const id = ids[(this.turn + i) % ids.length]!;
      const take = Math.min(share - (this.postingTo.get(id) ?? 0), free);
      if (take <= 0) continue;
      limits.set(id, take);
      free -= take;
    }
    return limits;
  }

  private async readWebhooks(): Promise<void> {
    if (Date.now() - this.webhooksReadAt < WEBHOOKS_FRESH_MS) return;
    this.webhookIds = await this.store.webhooks.enabledIds();
    this.webhooksReadAt = Date.now();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      try {
        if (Date.now() - this.lastPurge > PURGE_EVERY_MS) {
          this.lastPurge = Date.now();
          await this.store.webhookDeliveries.purgeEnded(new Date(Date.now() - this.options.keepEndedMs));
          await this.store.webhookDeliveries.dropUnowed();
        }
        await this.readWebhooks();
        const claimable = [...this.claimLimits().values()].reduce((sum, n) => sum + n, 0);
        // Claims wait for half a webhook's share of the slots to be free: one claim of many rows costs
        // about what a claim of one does. With every share taken, a webhook created meanwhile is
        // looked for again within a second.
        if (this.inFlight.size > 0 && claimable < Math.ceil(this.share() / 2)) {
          await Promise.race(claimable === 0 ? [...this.inFlight, sleep(WEBHOOKS_FRESH_MS)] : this.inFlight);
          continue;
        }
        const claimed = await this.runOnce();
        if (claimed === 0) await sleep(this.options.idleMs);
        // Caught up: let a few events gather, so that the next claim takes them in one transaction
        // rather than a claim per event taking the database's write lock from delivery each time.
        else if (claimed < claimable) await sleep(Math.min(GATHER_MS, this.options.idleMs));
      } catch (err) {
        // The claimed rows' leases run out and they come due again, here or elsewhere.
        this.logger[failureLevel(err)]({ err }, 'webhook round failed');
        await sleep(this.options.idleMs * 10);
      }
    }
    await Promise.allSettled(this.inFlight);
  }

  private async deliver(delivery: ClaimedDelivery, context: DeliveryContext | undefined): Promise<void> {
    const lease = { id: delivery.id, lease_token: delivery.lease_token };
    if (!context?.webhook || context.webhook.status !== 'enabled') {
      // Deleted or disabled after the event was recorded: nothing is owed any more.
      await this.store.webhookDeliveries.discard([lease]);
      return;
    }
    const attempts = this.options.retryScheduleMs.length + 1;
    if (delivery.attempts > attempts) {
      const error = `no outcome was recorded in ${attempts} attempts${delivery.last_error ? `; the last error: ${delivery.last_error}` : ''}`;
      return this.finish(delivery, { ...lease, state: 'failed', status: delivery.last_status, error: error.slice(0, 500) });
    }
    const payload = payloadOf(context);
    if ('missing' in payload) return this.finish(delivery, { ...lease, state: 'failed', status: null, error: payload.missing });
    const body = JSON.stringify(payload);
    const { endpoint, signing_secret, previous_signing_secret, previous_secret_expires_at } = context.webhook;
    const now = new Date();
    const previousSigns = previous_signing_secret !== null && previous_secret_expires_at !== null && new Date(previous_secret_expires_at) > now;
    const headers = signedHeaders(previousSigns ? [signing_secret, previous_signing_secret] : [signing_secret], delivery.id, now, body);
    const { status, error } = await this.outcomes.awaiting(() => this.poster.post(endpoint, headers, body));
    if (error === undefined) return this.finish(delivery, { ...lease, state: 'delivered', status });
    if (delivery.attempts >= attempts) return this.finish(delivery, { ...lease, state: 'failed', status, error });
    const retryAt = new Date(Date.now() + this.options.retryScheduleMs[delivery.attempts - 1]!);
    this.logger.info({ deliveryId: delivery.id, webhookId: delivery.webhook_id, attempts: delivery.attempts, retryAt, error }, 'webhook delivery failed; trying again later');
    await this.finish(delivery, { ...lease, state: 'pending', status, error, retryAt });
  }

  /** Records the outcome; a delivery that ended failed may disable its webhook. */
  private async finish(delivery: ClaimedDelivery, outcome: DeliveryOutcome): Promise<void> {
    const recorded = await this.persist(delivery, () => this.outcomes.record(outcome));
    if (!recorded) {
      this.logger.warn({ deliveryId: delivery.id, state: outcome.state }, 'outcome not recorded: this worker no longer holds the delivery');
      return;
    }
    if (outcome.state !== 'failed') return;
    this.logger.warn({ deliveryId: delivery.id, webhookId: delivery.webhook_id, attempts: delivery.attempts, error: outcome.error }, 'webhook delivery failed for good');
    const threshold = this.options.disableAfterFailed;
    const reason = `Disabled by the server: ${threshold} deliveries in a row failed every attempt, the last with ${outcome.error}`.slice(0, 999) + '.';
    if (await this.store.webhookDeliveries.disableIfFailing(delivery.webhook_id, threshold, reason, new Date())) {
      this.logger.warn({ webhookId: delivery.webhook_id, reason }, 'webhook disabled');
    }
  }

  /** Records the outcome (or reads what claimed deliveries need) while the claim lasts: see server/store/retryWhileClaimed.ts. */
  private persist<T>(delivery: ClaimedDelivery, attempt: () => Promise<T>, what = 'recording a webhook outcome'): Promise<T> {
    return retryWhileClaimed(delivery.next_attempt_at, attempt, {
      stopping: () => this.stopping,
      onRetry: (err) => this.logger.warn({ err, deliveryId: delivery.id }, `${what} failed; trying again`),
    });
  }
}
