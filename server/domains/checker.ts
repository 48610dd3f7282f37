// Makes the checks of domains' DNS records that are due: those asked for by `verify` at once, and
// verified or failed domains again every DOMAIN_CHECK_INTERVAL_MS. It runs in every HTTP server
// process; of several sharing a database, the claim (store/domains.ts) lets one check each domain.
import type { Logger } from 'pino';
import type { DomainOptions } from '../config.ts';
import { failureLevel } from '../store/database.ts';
import type { DomainStore } from '../store/domains.ts';
import type { Domains } from './domains.ts';
import { RecordLookup } from './lookup.ts';

/** How often due checks are looked for; `verify` does not wait for it (see `soon`). */
const POLL_MS = 5_000;
/** How long a claimed check may take before another process may make it. */
const CLAIM_MS = 60_000;
/** A look-up nobody answered is tried again this soon, or at the interval if that is sooner. */
const RETRY_MS = 60_000;
const AT_ONCE = 10;

export class DomainChecker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private readonly lookup: RecordLookup;

  constructor(
    private readonly store: DomainStore,
    private readonly domains: Domains,
    private readonly logger: Logger,
    private readonly options: Pick<DomainOptions, 'dnsServers' | 'checkIntervalMs'>,
  ) {
    this.lookup = new RecordLookup(options.dnsServers);
  }

  start(): void {
    this.timer = setInterval(() => this.soon(), POLL_MS);
    this.timer.unref();
    this.soon();
  }

  /** Makes the due checks now (after the round under way, if one is). */
  soon(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.round()
      .catch((err) => this.logger[failureLevel(err)]({ err }, 'domain checks failed; they are tried again'))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.soon();
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  private async round(): Promise<void> {
    for (;;) {
      const now = new Date();
      const claimed = await this.store.claimDue(now, new Date(now.getTime() + CLAIM_MS), AT_ONCE);
      if (claimed.length === 0) return;
      await Promise.all(
        claimed.map(async (domain) => {
          const statuses = await this.lookup.check(this.domains.recordsOf(domain));
          const kept = await this.domains.recordCheck(domain, statuses, new Date(Date.now() + this.waitAfter(Object.values(statuses))));
          if (kept && kept.status !== domain.status) this.logger.info({ domain: domain.name, status: kept.status, records: statuses }, 'domain checked');
        }),
      );
      if (claimed.length < AT_ONCE) return;
    }
  }

  private waitAfter(statuses: string[]): number {
    return statuses.includes('temporary_failure') ? Math.min(RETRY_MS, this.options.checkIntervalMs) : this.options.checkIntervalMs;
  }
}
