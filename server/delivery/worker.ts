// The delivery worker: claims due emails from the outbox, builds each MIME message (server/delivery/mime.ts)
// and hands it to the transport. Transient failures are retried with exponential backoff and full jitter,
// up to a bound, then the email fails; a message that cannot be built, or a 5xx to the sender rather
// than the recipients (MAIL FROM, AUTH), fails it at once. Every claim counts as an attempt, so an email whose attempts all ended without an
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
import { retryWhileClaimed } from '../store/retryWhileClaimed.ts';
import { failureLevel } from '../store/database.ts';
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

export class DeliveryWorker {
  private running: Promise<void> | undefined;
  /**
   * One commit per email would cost more than sending it; one per claimed batch would, after a crash,
   * send the whole batch again instead of the few in flight.
   */
  private readonly outcomes = new GroupCommit<Delivery>((group) => this.store.emails.markDelivered(group, new Date(), this.transport.final), {
    size: 32,
    gatherMs: 20,
    nextAnswerMs: 2,
  });
  private stopping = false;
  private lastPurge = 0;
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
    private readonly options: DeliveryOptions = DEFAULT_DELIVERY,
    private readonly links?: UnsubscribeLinks,
    private returnPaths?: ReturnPaths,
  ) {
    this.senders = new Senders(store.domains, { requireRegistered: false, bounceDomain: options.bounceDomain });
  }

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
    const batch = await this.startBatch(now);
    if (!batch) return 0;
    await batch.done;
    return batch.claimed;
  }

  /**
   * Claims one batch and starts delivering it. `nearlyDone` settles once no more than a quarter of it
   * is still out, `done` once all of it has its outcome (it rejects only if recording one failed for
   * good). Undefined when nothing is due.
   */
  private async startBatch(now = new Date()): Promise<{ claimed: number; nearlyDone: Promise<void>; done: Promise<void> } | undefined> {
    const emails = await this.store.emails.claimNextBatch(this.options.batchSize, now, this.options.leaseMs);
    if (emails.length === 0) return undefined;
    this.returnPaths ??= await this.persist(emails[0]!, () => returnPaths(this.store, undefined), 'reading the key that signs return paths');
    // Read again while the claim lasts if the database fails meanwhile: a round that gave up here
    // would leave the batch claimed and unsent until its lease ran out.
    const { broadcast, suppressed } = await this.persist(
      emails[0]!,
      async () => ({
        broadcast: emails.some((email) => email.broadcast_id !== null) ? await (await this.broadcasts()).forDelivery(emails) : undefined,
        suppressed: await suppressedIn(this.store, emails),
      }),
      'reading what a claimed batch needs',
    );
    // The claim lasts leaseMs; a batch still being sent then would come due for another worker and go
    // out twice. While any of its emails has no outcome, the claim is extended, every third of a lease.
    const unfinished = new Map(emails.map((email) => [email.id, email]));
    const renewing = setInterval(() => void this.extend(unfinished, emails[0]!.lease_token), this.options.leaseMs / 3);
    const nearly = Math.floor(emails.length / 4);
    const { promise: nearlyDonePromise, resolve: nearlyDone } = settledOnce();
    const delivering: Promise<void>[] = [];
    for (const [n, email] of emails.entries()) {
      // Messages are built a few at a time, letting the relay's answers in between: built all at once,
      // a batch held up the sends still out (the batch before's last ones) for as long as that took.
      if (n > 0 && n % BUILT_AT_ONCE === 0) await new Promise((resolve) => setImmediate(resolve));
      const delivered = this.deliver(email, suppressed, broadcast?.get(email.id)).finally(() => {
        unfinished.delete(email.id);
        if (unfinished.size <= nearly) nearlyDone();
      });
      delivering.push(delivered);
    }
    const done = Promise.all(delivering).then(() => undefined);
    // Handled here as well as by whoever awaits `done`, so that a failure is never left unhandled meanwhile.
    done
      .catch(() => undefined)
      .finally(() => {
        clearInterval(renewing);
        nearlyDone();
      });
    return { claimed: emails.length, nearlyDone: nearlyDonePromise, done };
  }

  /** Extends the claim on emails still being sent (one claim, one lease token); what records them may retry as long. */
  private async extend(unfinished: Map<string, ClaimedEmail>, leaseToken: string): Promise<void> {
    if (unfinished.size === 0) return;
    const until = new Date(Date.now() + this.options.leaseMs);
    try {
      await this.store.emails.extendLeases([...unfinished.keys()], leaseToken, until);
      for (const email of unfinished.values()) email.next_attempt_at = until.toISOString();
    } catch (err) {
      // The claim runs out as it would have; the next extension may yet hold it.
      this.logger.warn({ err }, 'extending the claim on emails being sent failed');
    }
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

  /**
   * Claims the next batch while the last quarter of the one before is still out, so that the relay's
   * connections are not left idle at every batch's end, while its claim and building take their
   * time: at most two batches are in hand at once.
   */
  private async loop(): Promise<void> {
    let before: Promise<void> = Promise.resolve();
    while (!this.stopping) {
      try {
        if (Date.now() - this.lastPurge > PURGE_EVERY_MS) {
          this.lastPurge = Date.now();
          await this.store.idempotency.purgeExpired(new Date());
        }
        const batch = await this.startBatch();
        if (!batch) {
          await before;
          await new Promise((resolve) => setTimeout(resolve, this.options.idleMs));
          continue;
        }
        await Promise.all([batch.nearlyDone, before]);
        before = batch.done.catch((err) => this.logger[failureLevel(err)]({ err }, 'delivery round failed'));
      } catch (err) {
        this.logger[failureLevel(err)]({ err }, 'delivery round failed');
        await new Promise((resolve) => setTimeout(resolve, this.options.idleMs * 10));
      }
    }
    await before;
  }

  /** `broadcast` is what became of a broadcast email before sending: its message, or why it is not sent. */
  private async deliver(email: ClaimedEmail, suppressed: Suppressed, broadcast?: BroadcastOutcome): Promise<void> {
    if (broadcast && 'cancel' in broadcast) return this.cancel(email, broadcast.cancel);
    if (email.attempts > this.options.maxAttempts) {
      const reason = `no outcome was recorded in ${this.options.maxAttempts} attempts${email.last_error ? `; the last error: ${email.last_error}` : ''}`;
      return this.fail(email, reason.slice(0, 500));
    }
    if (broadcast && 'fail' in broadcast) return this.fail(email, broadcast.fail.slice(0, 500));
    const source = broadcast ? broadcast.send : email;
    // Mail from a verified domain is signed with its key, and its bounces come back to its return path.
    const identity = await this.persist(email, () => this.senders.identity(source.from_address), "reading the sender's domain");
    let message: OutgoingMessage;
    try {
      message = toMessage(source, { ...identity, returnPaths: this.returnPaths });
    } catch (error) {
      // Nothing that building depends on can change: another attempt would fail the same way.
      return this.fail(email, `the message could not be built: ${reasonOf(error)}`);
    }
    // Read only now, for this email alone: attachments may be megabytes, and a claim holds many emails.
    if (email.attachment_count > 0) message.attachments = toAttachments(await this.persist(email, () => this.store.emails.attachments(email.id), 'reading the attachments'));
    if (email.deferred_recipients !== null) message = onlyTo(message, JSON.parse(email.deferred_recipients));
    const kept = withoutSuppressed(message, suppressed);
    if ('withdraw' in kept) return this.suppress(email, kept.withdraw);
    message = kept.send;
    let raw: string | undefined;
    let refused: Refusal[] | undefined;
    let deferred: Refusal[] | undefined;
    try {
      ({ raw, refused, deferred } = await this.outcomes.awaiting(() => this.transport.send(message)));
    } catch (error) {
      const refusedAll = recipientRefusal(error, message.envelope.to);
      const deferredAll = recipientDeferral(error);
      if (deferredAll.length > 0) return this.delay(email, deferral(deferredAll), { deferred: deferredAll, refused: refusedAll });
      if (refusedAll) return this.bounce(email, refusedAll);
      if (isPermanent(error)) return this.fail(email, reasonOf(error));
      // No reply from the relay at all (refused, timed out, broken off): the operator's to mend, unlike
      // a relay that answers "try again later", which mail meets every day.
      return this.delay(email, reasonOf(error), { level: (error as { responseCode?: number }).responseCode === undefined ? 'warn' : 'info' });
    }
    // A broadcast email keeps no copy of its body: it is personalized again when read back.
    const text = !broadcast && message.text !== undefined ? message.text : null;
    if (deferred?.length) {
      // The relay took it for the others (unless it refused them all for good): it was sent, to them.
      const took = message.envelope.to.length > deferred.length + (refused?.length ?? 0);
      return this.delay(email, deferral(deferred), { deferred, refused, ...(took && { sent: { messageId: message.messageId, text } }) });
    }
    // Refused for every recipient, each in a transaction of its own: as one transaction refused whole.
    if (refused?.length && refused.length >= message.envelope.to.length) return this.bounce(email, refused);
    // Not inside the try: a failure to record is not a failure to send. Recording is tried again while
    // the lease lasts; past it, the email comes due again and is sent again (at least once, never lost).
    const delivery = { id: email.id, lease_token: email.lease_token, messageId: message.messageId, text, raw };
    if (!(await this.persist(email, () => this.outcomes.record(delivery)))) this.leaseLost(email.id, 'delivered');
    if (refused?.length) await this.persist(email, () => this.store.reports.apply(email.id, bounced(refusal(refused), refused.map((r) => r.address)), new Date()));
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
    reason: string,
    { deferred, refused, sent, level = 'info' }: { deferred?: Refusal[]; refused?: Refusal[] | undefined; sent?: { messageId: string; text: string | null }; level?: 'info' | 'warn' } = {},
  ): Promise<void> {
    const bounce = refused?.length ? refusal(refused) : undefined;
    const partly: PartlyTaken = { sent: sent && { ...sent, final: this.transport.final }, refused: bounce && { bounce, addresses: suppressed(bounce, refused!) } };
    if (email.attempts >= this.options.maxAttempts) return this.fail(email, reason, partly);
    const ceiling = Math.min(this.options.retryMaxMs, this.options.retryBaseMs * 2 ** (email.attempts - 1));
    const retryAt = new Date(Date.now() + Math.random() * ceiling);
    this.logger[level]({ emailId: email.id, attempts: email.attempts, retryAt, reason }, 'delivery delayed');
    // Not `delivered` while some recipients wait: that comes with the last of them.
    const later = { deferred: deferred?.map((d) => d.address), sent, refused: partly.refused };
    if (!(await this.persist(email, () => this.store.emails.markDelayed(email, reason, retryAt, new Date(), later)))) this.leaseLost(email.id, 'delivery_delayed');
  }

  private async suppress(email: ClaimedEmail, data: SuppressedData): Promise<void> {
    this.logger.info({ emailId: email.id }, 'delivery suppressed');
    if (!(await this.persist(email, () => this.store.emails.markSuppressed(email, data, data.suppressed.message, new Date())))) this.leaseLost(email.id, 'suppressed');
  }

  private async bounce(email: ClaimedEmail, refused: Refusal[]): Promise<void> {
    const bounce = refusal(refused);
    this.logger.warn({ emailId: email.id, reason: bounce.message }, 'delivery bounced');
    const addresses = suppressed(bounce, refused);
    if (!(await this.persist(email, () => this.store.emails.markBounced(email, bounce, addresses, new Date())))) this.leaseLost(email.id, 'bounced');
  }

  /** `partly`: what the relay did with the recipients it did not defer, recorded before the failure. */
  private async fail(email: ClaimedEmail, reason: string, partly?: PartlyTaken): Promise<void> {
    this.logger.warn({ emailId: email.id, attempts: email.attempts, reason }, 'delivery failed');
    if (!(await this.persist(email, () => this.store.emails.markFailed(email, reason, new Date(), partly)))) this.leaseLost(email.id, 'failed');
  }

  private async cancel(email: ClaimedEmail, reason: string): Promise<void> {
    this.logger.info({ emailId: email.id, reason }, 'delivery canceled');
    if (!(await this.persist(email, () => this.store.emails.markCanceled(email, reason, new Date())))) this.leaseLost(email.id, 'canceled');
  }

  /** Records an outcome (or reads what a claimed batch needs) while the claim lasts: see server/store/retryWhileClaimed.ts. */
  private persist<T>(email: ClaimedEmail, outcome: () => Promise<T>, what = 'recording a delivery outcome'): Promise<T> {
    return retryWhileClaimed(email.next_attempt_at, outcome, {
      stopping: () => this.stopping,
      onRetry: (err) => this.logger.warn({ err, emailId: email.id }, `${what} failed; trying again`),
    });
  }

  /** The claim ran out and another worker holds the email, or it already has its outcome. */
  private leaseLost(emailId: string, outcome: string): void {
    this.logger.warn({ emailId, outcome }, 'outcome not recorded: this worker no longer holds the email');
  }
}

/** A promise and what settles it. */
function settledOnce(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((settle) => (resolve = settle));
  return { promise, resolve };
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
