// The webhook outbox worker: claims due deliveries (server/store/webhookDeliveries.ts) through the
// runner every outbox shares (server/outbox/runner.ts), posts each, signed, to its endpoint, and
// records how it went. Up to `concurrency` posts are in flight at once, in no particular order, each
// enabled webhook holding an equal share of them at most. Posts end within `timeoutMs`, shorter than
// the lease, which is not extended. A delivery that fails is tried again on Resend's schedule with the
// same `svix-id` (server/outbox/attempts.ts), then ends `failed`; a webhook whose deliveries keep
// failing every attempt is disabled.
// Ended deliveries are deleted once older than `keepEndedMs` (WEBHOOK_KEEP_DAYS, 30 days by default).
// `npm start` runs it in the HTTP server's thread (server/server.ts), `npm run worker` beside the
// delivery worker (server/bin/worker.ts).
import type { Logger } from 'pino';
import { Attempts, schedule } from '../outbox/attempts.ts';
import { OutboxRunner, type Hold } from '../outbox/runner.ts';
import { GroupCommit } from '../store/groupCommit.ts';
import type { Store } from '../store/index.ts';
import type { ClaimedDelivery, DeliveryContext, DeliveryOutcome } from '../store/webhookDeliveries.ts';
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
  private readonly outbox: OutboxRunner<ClaimedDelivery, Map<string, DeliveryContext>>;
  private readonly attempts: Attempts;
  /** Posts in flight, by webhook. */
  private readonly postingTo = new Map<string, number>();
  private inFlight = 0;
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
    this.attempts = new Attempts(options.retryScheduleMs.length + 1, schedule(options.retryScheduleMs));
    const deliveries = store.webhookDeliveries;
    this.outbox = new OutboxRunner<ClaimedDelivery, Map<string, DeliveryContext>>(
      {
        room: (free, inHand) => this.room(free, inHand),
        claim: (_limit, now, leaseMs) => deliveries.claimDue(this.claimLimits(this.turn++), now, leaseMs),
        prepare: (claimed, hold) => hold.persist(() => deliveries.contextOf(claimed.map((d) => d.id)), 'reading what claimed deliveries need'),
        work: (delivery, contexts, hold) => this.posting(delivery, () => this.deliver(delivery, contexts.get(delivery.id), hold)),
        tidy: async () => {
          await deliveries.purgeEnded(new Date(Date.now() - this.options.keepEndedMs));
          await deliveries.dropUnowed();
        },
      },
      logger,
      // Caught up, a claim lets a few events gather before the next, so that it takes them in one
      // transaction rather than a claim per event taking the database's write lock from delivery each
      // time. With every share taken, a webhook created meanwhile is looked for again within a second.
      {
        name: 'webhook delivery',
        itemKey: 'deliveryId',
        leaseMs: options.leaseMs,
        idleMs: options.idleMs,
        capacity: options.concurrency,
        gatherMs: GATHER_MS,
        recheckMs: WEBHOOKS_FRESH_MS,
        tidyEveryMs: PURGE_EVERY_MS,
      },
    );
  }

  start(): void {
    this.outbox.start();
  }

  /** Finishes the posts in flight and records them, then stops; unclaimed deliveries wait for the next worker. */
  async stop(): Promise<void> {
    await this.outbox.stop();
    this.poster.close();
  }

  /** Claims as many due deliveries as each webhook has free slots for and posts them; returns how many. */
  runOnce(now = new Date()): Promise<number> {
    return this.outbox.runOnce(now);
  }

  /**
   * How many deliveries to claim now. While posts are in flight, claims wait for half a webhook's share
   * of the slots to be free: one claim of many rows costs about what a claim of one does.
   */
  private async room(free: number, inHand: number): Promise<number> {
    await this.readWebhooks();
    let claimable = 0;
    for (const limit of this.claimLimits(this.turn, free).values()) claimable += limit;
    return inHand > 0 && claimable < Math.ceil(this.share() / 2) ? 0 : claimable;
  }

  /** Counts the delivery's post against its webhook's share while `post` runs. */
  private async posting(delivery: ClaimedDelivery, post: () => Promise<void>): Promise<void> {
    const webhookId = delivery.webhook_id;
    this.inFlight++;
    this.postingTo.set(webhookId, (this.postingTo.get(webhookId) ?? 0) + 1);
    try {
      await post();
    } finally {
      this.inFlight--;
      const left = this.postingTo.get(webhookId)! - 1;
      if (left > 0) this.postingTo.set(webhookId, left);
      else this.postingTo.delete(webhookId);
    }
  }

  /** The post slots each webhook may use: an equal share of them all. */
  private share(): number {
    return Math.max(1, Math.floor(this.options.concurrency / Math.max(1, this.webhookIds.length)));
  }

  /**
   * How many due deliveries of each webhook a claim may take now, starting with the webhook whose
   * `turn` it is: its share of the slots less its posts in flight, while free slots last (100 a claim
   * at most). So an endpoint that hangs, or is slow, holds its share of the slots at most, and the
   * other webhooks' events go on being posted.
   */
  private claimLimits(turn: number, free = this.options.concurrency - this.inFlight): Map<string, number> {
    const ids = this.webhookIds;
    const share = this.share();
    let left = Math.min(free, 100);
    const limits = new Map<string, number>();
    for (let i = 0; i < ids.length && left > 0; i++) {
      const id = ids[(turn + i) % ids.length]!;
      const take = Math.min(share - (this.postingTo.get(id) ?? 0), left);
      if (take <= 0) continue;
      limits.set(id, take);
      left -= take;
    }
    return limits;
  }

  private async readWebhooks(): Promise<void> {
    if (Date.now() - this.webhooksReadAt < WEBHOOKS_FRESH_MS) return;
    this.webhookIds = await this.store.webhooks.enabledIds();
    this.webhooksReadAt = Date.now();
  }

  private async deliver(delivery: ClaimedDelivery, context: DeliveryContext | undefined, hold: Hold): Promise<void> {
    const lease = { id: delivery.id, lease_token: delivery.lease_token };
    if (!context?.webhook || context.webhook.status !== 'enabled') {
      // Deleted or disabled after the event was recorded: nothing is owed any more.
      await this.store.webhookDeliveries.discard([lease]);
      return;
    }
    const spent = this.attempts.spent(delivery);
    if (spent) return this.finish(delivery, hold, { ...lease, state: 'failed', status: delivery.last_status, error: spent });
    const payload = payloadOf(context);
    if ('missing' in payload) return this.finish(delivery, hold, { ...lease, state: 'failed', status: null, error: payload.missing });
    const body = JSON.stringify(payload);
    const { endpoint, signing_secret, previous_signing_secret, previous_secret_expires_at } = context.webhook;
    const now = new Date();
    const previousSigns = previous_signing_secret !== null && previous_secret_expires_at !== null && new Date(previous_secret_expires_at) > now;
    const headers = signedHeaders(previousSigns ? [signing_secret, previous_signing_secret] : [signing_secret], delivery.id, now, body);
    const { status, error } = await this.outcomes.awaiting(() => this.poster.post(endpoint, headers, body));
    if (error === undefined) return this.finish(delivery, hold, { ...lease, state: 'delivered', status });
    const retryAt = this.attempts.retryAt(delivery.attempts);
    if (!retryAt) return this.finish(delivery, hold, { ...lease, state: 'failed', status, error });
    this.logger.info({ deliveryId: delivery.id, webhookId: delivery.webhook_id, attempts: delivery.attempts, retryAt, error }, 'webhook delivery failed; trying again later');
    await this.finish(delivery, hold, { ...lease, state: 'pending', status, error, retryAt });
  }

  /** Records the outcome; a delivery that ended failed may disable its webhook. */
  private async finish(delivery: ClaimedDelivery, hold: Hold, outcome: DeliveryOutcome): Promise<void> {
    const recorded = await hold.persist(() => this.outcomes.record(outcome), 'recording a webhook outcome');
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
}
