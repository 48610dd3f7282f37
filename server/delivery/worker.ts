// The delivery worker: claims due emails from the outbox (through the runner every outbox shares,
// server/outbox/runner.ts: leases, their extension, stopping), builds each MIME message
// (server/delivery/mime.ts) and hands it to the transport. Transient failures are retried with
// exponential backoff and full jitter, up to a bound (server/outbox/attempts.ts), then the email fails;
// a message that cannot be built, or a 5xx to the sender rather than the recipients (MAIL FROM, AUTH),
// fails it at once. Every claim counts as an attempt, so an email whose attempts all ended without an
// outcome (its workers died with it) fails too. Messages are built here (server/delivery/message.ts),
// not on the request path: making plain text from HTML costs milliseconds per message.
//
// A broadcast's email is checked again and personalized here (server/broadcasts/mail.ts): a contact
// that was deleted, unsubscribed, or left the segment or the topic since the fan-out is not sent to,
// and the email ends `canceled`. A batch without broadcast emails costs no query for it.
//
// Suppressed recipients are taken out of each message (server/delivery/suppression.ts), with one query
// per claimed batch; an email left with none ends `suppressed`. A relay's 5xx to recipients is a
// Permanent bounce: the email ends `bounced` and those addresses are suppressed (unless the refusal is
// about the message, not the addresses: see `suppressed` below). A relay's 4xx to some recipients is
// a delay for them alone: the email is `delivery_delayed`, and the next attempt goes to the recipients
// deferred, so those who have the message do not get it twice. On the last attempt the email fails for
// those deferred alone: whom the relay took or refused is recorded first, as on any other attempt.
import type { Logger } from 'pino';
import { BroadcastMail, type BroadcastOutcome, type UnsubscribeLinks } from '../broadcasts/mail.ts';
import { defaultPublicUrl, unsubscribeTokens } from '../broadcasts/unsubscribeToken.ts';
import type { ClaimedEmail, PartlyTaken } from '../store/emails.ts';
import { Senders } from '../domains/senders.ts';
import { GroupCommit } from '../store/groupCommit.ts';
import type { Store } from '../store/index.ts';
import { Attempts, doubling, fullJitter } from '../outbox/attempts.ts';
import { OutboxRunner, type Hold } from '../outbox/runner.ts';
import { refusal, suppresses, type Bounce } from './bounce.ts';
import { toAttachments, toMessage, type OutgoingMessage } from './message.ts';
import { DEFAULT_DELIVERY, type DeliveryOptions } from './options.ts';
import { returnPaths, type ReturnPaths } from './returnPath.ts';
import { bounced } from './report.ts';
import { suppressedIn, withoutSuppressed, type Suppressed, type SuppressedData } from './suppression.ts';
import { isPermanent, recipientDeferral, recipientRefusal, type Refusal, type Transport } from './transport.ts';

export { DEFAULT_DELIVERY, type DeliveryOptions };

const PURGE_EVERY_MS = 60_000;
/** Messages built between turns of the event loop. */
const BUILT_AT_ONCE = 10;
type Delivery = Parameters<Store['emails']['markDelivered']>[0][number];

/** What a claimed batch needs, read once for all of it. */
interface BatchNeeds {
  broadcast: Map<string, BroadcastOutcome> | undefined;
  suppressed: Suppressed;
}

export class DeliveryWorker {
  private readonly outbox: OutboxRunner<ClaimedEmail, BatchNeeds>;
  private readonly attempts: Attempts;
  /**
   * One commit per email would cost more than sending it; one per claimed batch would, after a crash,
   * send the whole batch again instead of the few in flight.
   */
  private readonly outcomes = new GroupCommit<Delivery>((group) => this.store.emails.markDelivered(group, new Date(), this.transport.final), {
    size: 32,
    gatherMs: 20,
    nextAnswerMs: 2,
  });
  private broadcastMail: Promise<BroadcastMail> | undefined;
  private readonly senders: Senders;

  /**
   * `links` makes the unsubscribe URLs of broadcast emails; without it they are signed with the
   * secret kept in the store, under the default public URL. `returnPaths` signs return paths; without
   * it, they are signed with the secret kept in the store.
   */
  constructor(
    private readonly store: Store,
    private readonly transport: Transport,
    private readonly logger: Logger,
    options: DeliveryOptions = DEFAULT_DELIVERY,
    private readonly links?: UnsubscribeLinks,
    private returnPaths?: ReturnPaths,
  ) {
    this.senders = new Senders(store.domains, { requireRegistered: false, bounceDomain: options.bounceDomain });
    this.attempts = new Attempts(options.maxAttempts, fullJitter(doubling({ firstMs: options.retryBaseMs, maxMs: options.retryMaxMs })));
    const { batchSize, leaseMs, idleMs } = options;
    this.outbox = new OutboxRunner<ClaimedEmail, BatchNeeds>(
      {
        // The next batch is claimed while the last quarter of the one before is still out, so that the
        // relay's connections are not left idle at every batch's end while its claim and building take
        // their time.
        room: (free) => (free >= batchSize ? batchSize : 0),
        claim: (limit, now) => store.emails.claimNextBatch(limit, now, leaseMs),
        prepare: (emails, hold) => this.prepare(emails, hold),
        work: (email, needs, hold) => this.deliver(email, needs, hold),
        // A batch still being sent when its lease ran out would come due for another worker and go out twice.
        extend: (ids, leaseToken, until) => store.emails.extendLeases(ids, leaseToken, until),
        tidy: () => store.idempotency.purgeExpired(new Date()).then(() => undefined),
      },
      logger,
      // Messages are built a few at a time, letting the relay's answers in between: built all at once, a
      // batch held up the sends still out (the batch before's last ones) for as long as that took.
      { name: 'delivery', itemKey: 'emailId', leaseMs, idleMs, capacity: batchSize + Math.floor(batchSize / 4), startsPerTurn: BUILT_AT_ONCE, tidyEveryMs: PURGE_EVERY_MS },
    );
  }

  start(): void {
    this.outbox.start();
  }

  /** Finishes the emails in hand, then stops; unclaimed ones wait for the next worker. */
  async stop(): Promise<void> {
    await this.outbox.stop();
    this.transport.close();
  }

  /** Claims one batch and delivers it; returns how many emails it handled. Rejects if recording an outcome failed for good. */
  runOnce(now = new Date()): Promise<number> {
    return this.outbox.runOnce(now);
  }

  /** Reads what a claimed batch needs: the key that signs return paths, its broadcast emails' messages, its suppressed recipients. */
  private async prepare(emails: ClaimedEmail[], hold: Hold): Promise<BatchNeeds> {
    this.returnPaths ??= await hold.persist(() => returnPaths(this.store, undefined), 'reading the key that signs return paths');
    return hold.persist(
      async () => ({
        // A batch without broadcast emails costs no query for them.
        broadcast: emails.some((email) => email.broadcast_id !== null) ? await (await this.broadcasts()).forDelivery(emails) : undefined,
        suppressed: await suppressedIn(this.store, emails),
      }),
      'reading what a claimed batch needs',
    );
  }

  private broadcasts(): Promise<BroadcastMail> {
    this.broadcastMail ??= (async () => {
      const links = this.links ?? { tokens: await unsubscribeTokens(this.store, undefined), publicUrl: () => defaultPublicUrl('127.0.0.1', 3000) };
      return new BroadcastMail(this.store, links);
    })();
    // A failure (the database away at the first broadcast email) is tried again next round.
    this.broadcastMail.catch(() => (this.broadcastMail = undefined));
    return this.broadcastMail;
  }

  /** `broadcast` is what became of a broadcast email before sending: its message, or why it is not sent. */
  private async deliver(email: ClaimedEmail, needs: BatchNeeds, hold: Hold): Promise<void> {
    const broadcast = needs.broadcast?.get(email.id);
    if (broadcast && 'cancel' in broadcast) return this.cancel(email, hold, broadcast.cancel);
    const spent = this.attempts.spent(email);
    if (spent) return this.fail(email, hold, spent);
    if (broadcast && 'fail' in broadcast) return this.fail(email, hold, broadcast.fail.slice(0, 500));
    const source = broadcast ? broadcast.send : email;
    // Mail from a verified domain is signed with its key, and its bounces come back to its return path.
    const identity = await hold.persist(() => this.senders.identity(source.from_address), "reading the sender's domain");
    let message: OutgoingMessage;
    try {
      message = toMessage(source, { ...identity, returnPaths: this.returnPaths });
    } catch (error) {
      // Nothing that building depends on can change: another attempt would fail the same way.
      return this.fail(email, hold, `the message could not be built: ${reasonOf(error)}`);
    }
    // Read only now, for this email alone: attachments may be megabytes, and a claim holds many emails.
    if (email.attachment_count > 0) message.attachments = toAttachments(await hold.persist(() => this.store.emails.attachments(email.id), 'reading the attachments'));
    if (email.deferred_recipients !== null) message = onlyTo(message, JSON.parse(email.deferred_recipients));
    const kept = withoutSuppressed(message, needs.suppressed);
    if ('withdraw' in kept) return this.suppress(email, hold, kept.withdraw);
    message = kept.send;
    let raw: string | undefined;
    let refused: Refusal[] | undefined;
    let deferred: Refusal[] | undefined;
    try {
      ({ raw, refused, deferred } = await this.outcomes.awaiting(() => this.transport.send(message)));
    } catch (error) {
      const refusedAll = recipientRefusal(error, message.envelope.to);
      const deferredAll = recipientDeferral(error);
      if (deferredAll.length > 0) return this.delay(email, hold, deferral(deferredAll), { deferred: deferredAll, refused: refusedAll });
      if (refusedAll) return this.bounce(email, hold, refusedAll);
      if (isPermanent(error)) return this.fail(email, hold, reasonOf(error));
      // No reply from the relay at all (refused, timed out, broken off): the operator's to mend, unlike
      // a relay that answers "try again later", which mail meets every day.
      return this.delay(email, hold, reasonOf(error), { level: (error as { responseCode?: number }).responseCode === undefined ? 'warn' : 'info' });
    }
    // A broadcast email keeps no copy of its body: it is personalized again when read back.
    const text = !broadcast && message.text !== undefined ? message.text : null;
    if (deferred?.length) {
      // The relay took it for the others (unless it refused them all for good): it was sent, to them.
      const took = message.envelope.to.length > deferred.length + (refused?.length ?? 0);
      return this.delay(email, hold, deferral(deferred), { deferred, refused, ...(took && { sent: { messageId: message.messageId, text } }) });
    }
    // Refused for every recipient, each in a transaction of its own: as one transaction refused whole.
    if (refused?.length && refused.length >= message.envelope.to.length) return this.bounce(email, hold, refused);
    // Not inside the try: a failure to record is not a failure to send. Recording is tried again while
    // the lease lasts; past it, the email comes due again and is sent again (at least once, never lost).
    const delivery = { id: email.id, lease_token: email.lease_token, messageId: message.messageId, text, raw };
    if (!(await this.record(hold, () => this.outcomes.record(delivery)))) this.leaseLost(email.id, 'delivered');
    if (refused?.length) await this.record(hold, () => this.store.reports.apply(email.id, bounced(refusal(refused), refused.map((r) => r.address)), new Date()));
  }

  /**
   * Tries again later, or fails the email once its attempts are spent. `deferred`: the recipients the
   * relay put off (4xx) while it took the message for the others or refused them for good; the next
   * attempt goes to them alone. `refused`: those it refused for good meanwhile, suppressed now. `sent`:
   * the message the relay took for the others. Those two are recorded on the last attempt too, before
   * the email fails for the deferred alone. `level`: of the log line.
   */
  private async delay(
    email: ClaimedEmail,
    hold: Hold,
    reason: string,
    { deferred, refused, sent, level = 'info' }: { deferred?: Refusal[]; refused?: Refusal[] | undefined; sent?: { messageId: string; text: string | null }; level?: 'info' | 'warn' } = {},
  ): Promise<void> {
    const bounce = refused?.length ? refusal(refused) : undefined;
    const partly: PartlyTaken = { sent: sent && { ...sent, final: this.transport.final }, refused: bounce && { bounce, addresses: suppressed(bounce, refused!) } };
    const retryAt = this.attempts.retryAt(email.attempts);
    if (!retryAt) return this.fail(email, hold, reason, partly);
    this.logger[level]({ emailId: email.id, attempts: email.attempts, retryAt, reason }, 'delivery delayed');
    // Not `delivered` while some recipients wait: that comes with the last of them.
    const later = { deferred: deferred?.map((d) => d.address), sent, refused: partly.refused };
    if (!(await this.record(hold, () => this.store.emails.markDelayed(email, reason, retryAt, new Date(), later)))) this.leaseLost(email.id, 'delivery_delayed');
  }

  private async suppress(email: ClaimedEmail, hold: Hold, data: SuppressedData): Promise<void> {
    this.logger.info({ emailId: email.id }, 'delivery suppressed');
    if (!(await this.record(hold, () => this.store.emails.markSuppressed(email, data, data.suppressed.message, new Date())))) this.leaseLost(email.id, 'suppressed');
  }

  private async bounce(email: ClaimedEmail, hold: Hold, refused: Refusal[]): Promise<void> {
    const bounce = refusal(refused);
    this.logger.warn({ emailId: email.id, reason: bounce.message }, 'delivery bounced');
    const addresses = suppressed(bounce, refused);
    if (!(await this.record(hold, () => this.store.emails.markBounced(email, bounce, addresses, new Date())))) this.leaseLost(email.id, 'bounced');
  }

  /** `partly`: what the relay did with the recipients it did not defer, recorded before the failure. */
  private async fail(email: ClaimedEmail, hold: Hold, reason: string, partly?: PartlyTaken): Promise<void> {
    this.logger.warn({ emailId: email.id, attempts: email.attempts, reason }, 'delivery failed');
    if (!(await this.record(hold, () => this.store.emails.markFailed(email, reason, new Date(), partly)))) this.leaseLost(email.id, 'failed');
  }

  private async cancel(email: ClaimedEmail, hold: Hold, reason: string): Promise<void> {
    this.logger.info({ emailId: email.id, reason }, 'delivery canceled');
    if (!(await this.record(hold, () => this.store.emails.markCanceled(email, reason, new Date())))) this.leaseLost(email.id, 'canceled');
  }

  /** Records an outcome while the lease lasts. */
  private record<T>(hold: Hold, outcome: () => Promise<T>): Promise<T> {
    return hold.persist(outcome, 'recording a delivery outcome');
  }

  /** The claim ran out and another worker holds the email, or it already has its outcome. */
  private leaseLost(emailId: string, outcome: string): void {
    this.logger.warn({ emailId, outcome }, 'outcome not recorded: this worker no longer holds the email');
  }
}

const reasonOf = (error: unknown) => {
  const message = String((error as Error)?.message ?? error);
  // OpenSSL's own words come with its codes and a source path: `…:SSL routines:ssl3_get_record:wrong version number:../deps/…`.
  const tls = /^[\dA-F]+:error:[\dA-F]+:SSL routines:[^:]*:([^:]+)/.exec(message);
  if (tls) return `TLS with the relay failed: ${tls[1]} (smtps:// speaks TLS from the start, smtp:// upgrades with STARTTLS)`;
  return message.trim().slice(0, 500);
};

/** Why a delivery waits for recipients the relay put off (4xx), in its own words for the first of them. */
const deferral = (deferred: Refusal[]) => `the relay deferred ${deferred.map((d) => d.address).join(', ')}: ${deferred[0]!.reply}`.slice(0, 500);

/**
 * Who a relay's refusal puts on the suppression list: the recipients refused one by one, and those
 * refused with the message only when its reply says the address is bad (5.1.x); never for a refusal
 * that is about the message (see bounce.ts `suppresses`).
 */
function suppressed(bounce: Bounce, refused: Refusal[]): string[] {
  if (!suppresses(bounce)) return [];
  return refused.filter((r) => !r.withMessage || bounce.subType === 'NoEmail').map((r) => r.address);
}

/** The message with only `addresses` (as the relay deferred them) left in its envelope; headers stay as written. */
function onlyTo(message: OutgoingMessage, addresses: string[]): OutgoingMessage {
  const wanted = new Set(addresses.map((address) => address.toLowerCase()));
  return { ...message, envelope: { ...message.envelope, to: message.envelope.to.filter((address) => wanted.has(address.toLowerCase())) } };
}
