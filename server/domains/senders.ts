// Who may send from where, and how their mail leaves. Read on every send (the domains, a handful of
// rows, are read at most once a second per process):
// - a `from` on a domain that is registered and not verified is refused (403, as Resend refuses it);
// - a `from` on a domain never registered is refused when NODE_ENV=production or
//   REQUIRE_VERIFIED_DOMAIN=true; otherwise it is sent unsigned, with one warning per domain;
// - a key restricted to a domain (`domain_id`) sends from that domain alone.
// At delivery, mail from a verified domain is signed with its key and bounces come back to its
// return-path subdomain (`send.acme.dev`) when the server receives bounces at all.
import type { Logger } from 'pino';
import type { DomainOptions } from '../config.ts';
import { parseMailbox } from '../emails/mailbox.ts';
import type { SendingIdentity } from '../delivery/message.ts';
import type { ApiKeyRecord } from '../store/apiKeys.ts';
import type { DomainRecord, DomainStore } from '../store/domains.ts';
import { isSendable } from './records.ts';

/** How long the domains read are trusted; a domain changed by another process is seen within this, one changed by this one at once. */
const TRUSTED_MS = 1000;
/** Domains warned of, at most: a sender trying many made-up domains cannot grow it. */
const WARNED_AT_MOST = 1000;

export class Senders {
  private read: { until: number; writes: number; byName: Promise<Map<string, DomainRecord>> } | undefined;
  private readonly warned = new Set<string>();

  constructor(
    private readonly store: DomainStore,
    private readonly options: Pick<DomainOptions, 'requireRegistered' | 'bounceDomain'>,
    private readonly logger?: Logger,
  ) {}

  /** Refuses (throws a 403) unless `key` may send from every one of these `from` values. */
  async check(froms: string[], key: Pick<ApiKeyRecord, 'domain_id'> | undefined): Promise<void> {
    const domains = await this.domains();
    for (const name of new Set(froms.map(domainOf))) {
      const domain = domains.get(name);
      if (key?.domain_id && domain?.id !== key.domain_id) {
        throw forbidden(`This API key may send only from its own domain; ${name} is not it.`);
      }
      if (domain && !isSendable(domain)) {
        throw forbidden(`The ${name} domain is not verified. Publish its DNS records and verify it (POST /domains/${domain.id}/verify) before sending from it.`);
      }
      if (!domain && this.options.requireRegistered) {
        throw forbidden(`The ${name} domain is not registered. Add it (POST /domains), publish its DNS records and verify it before sending from it.`);
      }
      if (!domain && !this.warned.has(name) && this.warned.size < WARNED_AT_MOST) {
        this.warned.add(name);
        this.logger?.warn({ domain: name }, 'sending from a domain that is not registered: its mail goes out unsigned; add and verify it (POST /domains)');
      }
    }
  }

  /** How mail from `from` leaves: signed with its domain's key when that domain is verified. */
  async identity(from: string): Promise<SendingIdentity> {
    const domain = (await this.domains()).get(domainOf(from));
    if (!domain || !isSendable(domain)) return { bounceDomain: this.options.bounceDomain };
    return {
      bounceDomain: this.options.bounceDomain && `${domain.return_path}.${domain.name}`,
      dkim: { domainName: domain.name, keySelector: domain.dkim_selector, privateKey: domain.dkim_private_key, headerFieldNames: SIGNED_HEADERS },
    };
  }

  private domains(): Promise<Map<string, DomainRecord>> {
    if (!this.read || this.read.until < performance.now() || this.read.writes !== this.store.writes) {
      const read = { until: performance.now() + TRUSTED_MS, writes: this.store.writes, byName: this.store.all().then((rows) => new Map(rows.map((row) => [row.name, row]))) };
      this.read = read;
      // A failed read is not kept: the next send reads again.
      read.byName.catch(() => this.read === read && (this.read = undefined));
    }
    return this.read.byName;
  }
}

/**
 * The header fields a signature covers when present: RFC 6376's list, and `List-Unsubscribe-Post`,
 * which RFC 8058 wants signed before a receiver offers one-click unsubscribe (nodemailer's own list
 * lacks it), and `Feedback-ID`.
 */
const SIGNED_HEADERS = [
  'From', 'Sender', 'Reply-To', 'Subject', 'Date', 'Message-ID', 'To', 'Cc', 'MIME-Version', 'Content-Type', 'Content-Transfer-Encoding',
  'Content-ID', 'Content-Description', 'In-Reply-To', 'References', 'List-Id', 'List-Help', 'List-Unsubscribe', 'List-Unsubscribe-Post',
  'List-Subscribe', 'List-Post', 'List-Owner', 'List-Archive', 'Feedback-ID',
].join(':');

/** The lower-cased domain of a mailbox string, as accepted emails hold it. */
const domainOf = (from: string) => {
  const address = parseMailbox(from)?.address ?? from;
  return address.slice(address.lastIndexOf('@') + 1).toLowerCase();
};

/**
 * A `from` these rules refuse; answered 403 `validation_error` (server/errors.ts). Its own class, so
 * that the delivery thread, which reads identities here, need not load the HTTP layer's errors.
 */
export class SendRefused extends Error {}

const forbidden = (message: string) => new SendRefused(message);
