// The DNS records a domain publishes, and what their checks make of the domain. The records follow
// from the domain and the server's configuration, so only their statuses are stored (`record_status`,
// by key). Names are relative to the domain, as Resend gives them.
//
// - DKIM: `<selector>._domainkey`, TXT `p=<public key>`: what receivers check mail from it against.
//   While a key is being rotated in, its record is listed second, under its own selector; it is not
//   required, and once a check finds it the new key signs and the old record is no longer listed.
// - SPF: on the return path's subdomain (`send`), TXT `v=spf1 mx ~all`: the bounce address's sender
//   policy; any `v=spf1` record there passes the check, so an operator may name the relay's hosts.
// - SPF MX: the return path's MX, pointing at the inbound listener, listed only when the server
//   receives bounces (BOUNCE_DOMAIN).
// - DMARC: `_dmarc`, a suggested `p=none` policy: checked, never required.
import type { Schemas } from '../api.ts';
import type { DomainOptions } from '../config.ts';
import type { DomainStatus } from '../store/database.ts';
import type { DomainRecord as StoredDomain } from '../store/domains.ts';

export type RecordKey = 'dkim' | 'dkim_next' | 'spf' | 'return_path_mx' | 'dmarc';
export type RecordStatus = Schemas['DomainRecordStatus'];
export type RecordStatuses = Partial<Record<RecordKey, RecordStatus>>;

export type DomainRecordSource = Pick<StoredDomain, 'name' | 'return_path' | 'dkim_selector' | 'dkim_public_key' | 'dkim_next_selector' | 'dkim_next_public_key'>;

/** A record to publish, and what its check looks for. */
export interface PublishedRecord {
  key: RecordKey;
  /** Whether the domain is verified only once this record is. */
  required: boolean;
  /** The full name looked up. */
  fqdn: string;
  wire: Omit<Schemas['DomainRecord'], 'status'>;
}

export const SUGGESTED_DMARC = 'v=DMARC1; p=none;';
export const SPF_VALUE = 'v=spf1 mx ~all';

/** The records `domain` publishes, DKIM first. */
export function recordsOf(domain: DomainRecordSource, options: Pick<DomainOptions, 'bounceDomain' | 'mxHost'>): PublishedRecord[] {
  const at = (name: string) => `${name}.${domain.name}`;
  const dkim = (key: 'dkim' | 'dkim_next', selector: string, publicKey: string): PublishedRecord => {
    const name = `${selector}._domainkey`;
    return { key, required: key === 'dkim', fqdn: at(name), wire: { record: 'DKIM', name, type: 'TXT', value: `p=${publicKey}`, ttl: 'Auto' } };
  };
  const records: PublishedRecord[] = [dkim('dkim', domain.dkim_selector, domain.dkim_public_key)];
  if (domain.dkim_next_selector && domain.dkim_next_public_key) records.push(dkim('dkim_next', domain.dkim_next_selector, domain.dkim_next_public_key));
  // Mail goes out from the return-path subdomain only when bounces come back (BOUNCE_DOMAIN): without
  // it, the envelope sender is the From address, and this record is checked but not needed.
  const returnPathUsed = Boolean(options.bounceDomain);
  records.push({ key: 'spf', required: returnPathUsed, fqdn: at(domain.return_path), wire: { record: 'SPF', name: domain.return_path, type: 'TXT', value: SPF_VALUE, ttl: 'Auto' } });
  if (options.bounceDomain && options.mxHost) {
    records.push({ key: 'return_path_mx', required: true, fqdn: at(domain.return_path), wire: { record: 'SPF', name: domain.return_path, type: 'MX', value: options.mxHost, ttl: 'Auto', priority: 10 } });
  }
  records.push({ key: 'dmarc', required: false, fqdn: at('_dmarc'), wire: { record: 'DMARC', name: '_dmarc', type: 'TXT', value: SUGGESTED_DMARC, ttl: 'Auto' } });
  return records;
}

/** The records as answered, each with its status (`not_started` before any check). */
export function wireRecords(records: PublishedRecord[], statuses: RecordStatuses): Schemas['DomainRecord'][] {
  return records.map((record) => ({ ...record.wire, status: statuses[record.key] ?? 'not_started' }));
}

/**
 * The domain's status from its required records' statuses after a check: verified when all are;
 * failed when one is missing or different; temporary_failure when a look-up was not answered.
 */
export function domainStatusOf(records: PublishedRecord[], statuses: RecordStatuses): DomainStatus {
  const required = records.filter((record) => record.required).map((record) => statuses[record.key] ?? 'not_started');
  if (required.every((status) => status === 'verified')) return 'verified';
  if (required.includes('failed')) return 'failed';
  if (required.includes('temporary_failure')) return 'temporary_failure';
  return required.includes('pending') ? 'pending' : 'not_started';
}

/**
 * Whether mail from the domain is signed and may be sent: once verified, it stays so while a check
 * is under way or could not be answered; a check that found a record gone or changed ends it.
 */
export const isSendable = (domain: Pick<StoredDomain, 'status' | 'verified_at'>): boolean =>
  domain.verified_at !== null && ['verified', 'pending', 'temporary_failure'].includes(domain.status);
