// Looks a domain's records up in DNS, as a receiving server would find them: node's resolver, asking
// DNS_SERVERS when set (tests run a real DNS server on loopback) or the system's resolvers. A record
// missing or different is `failed`; a look-up nobody answered, or answered with a server failure,
// is `temporary_failure`, and is tried again sooner.
import { Resolver } from 'node:dns/promises';
import type { PublishedRecord, RecordStatus, RecordStatuses } from './records.ts';

/** Answers that say the name or the record is not there: the record is missing. */
const ABSENT = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME', 'NXDOMAIN']);

export class RecordLookup {
  private readonly resolver: Resolver;

  constructor(dnsServers: string[], timeoutMs = 3000) {
    this.resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
    if (dnsServers.length > 0) this.resolver.setServers(dnsServers);
  }

  /** Each record's status, looked up at once. */
  async check(records: PublishedRecord[]): Promise<RecordStatuses> {
    const statuses = await Promise.all(records.map(async (record) => [record.key, await this.checkOne(record)] as const));
    return Object.fromEntries(statuses);
  }

  private async checkOne(record: PublishedRecord): Promise<RecordStatus> {
    try {
      if (record.wire.type === 'MX') {
        const exchanges = await this.resolver.resolveMx(record.fqdn);
        return exchanges.some((mx) => sameHost(mx.exchange, record.wire.value)) ? 'verified' : 'failed';
      }
      // A TXT record may come in strings of 255 characters: joined, they are the value.
      const texts = (await this.resolver.resolveTxt(record.fqdn)).map((chunks) => chunks.join(''));
      return texts.some((text) => matches(record, text)) ? 'verified' : 'failed';
    } catch (error) {
      return ABSENT.has((error as NodeJS.ErrnoException).code ?? '') ? 'failed' : 'temporary_failure';
    }
  }
}

function matches(record: PublishedRecord, text: string): boolean {
  switch (record.key) {
    case 'dkim':
    case 'dkim_next':
      return tagsOf(text).get('p') === tagsOf(record.wire.value).get('p');
    case 'spf':
      return /^v=spf1(\s|$)/i.test(text.trim());
    case 'dmarc':
      return /^v=DMARC1\s*(;|$)/i.test(text.trim());
    default:
      return false;
  }
}

/** A DKIM record's tags (RFC 6376 3.2), whitespace within values dropped, as verifiers read them. */
function tagsOf(text: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of text.split(';')) {
    const at = part.indexOf('=');
    if (at > 0) tags.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).replace(/\s+/g, ''));
  }
  return tags;
}

const sameHost = (a: string, b: string) => a.replace(/\.$/, '').toLowerCase() === b.replace(/\.$/, '').toLowerCase();
