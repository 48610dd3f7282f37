// Sending domains, callable without HTTP: registering one (with a DKIM key of its own), its settings,
// and the checks of its DNS records. A check is asked for by `verify` and made by the DomainChecker
// (./checker.ts), which also checks verified and failed domains again every DOMAIN_CHECK_INTERVAL_MS:
// a verified domain whose DKIM record disappears goes `failed`, with a `domain.updated` event.
import { generateKeyPair, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { Schemas } from '../api.ts';
import type { DomainOptions } from '../config.ts';
import type { DomainRecord, DomainStore } from '../store/domains.ts';
import { domainStatusOf, recordsOf, wireRecords, type DomainRecordSource, type RecordStatuses } from './records.ts';

/** The selector of every domain's first key; a rotated key gets another (README: rotating a key). */
export const DKIM_SELECTOR = 'mailroom';
/** Receivers take keys of 1024 bits and up; 2048 is what they recommend and what fits a TXT record well. */
const DKIM_BITS = 2048;

const makeKeyPair = promisify(generateKeyPair);

export type CreateDomain = Schemas['CreateDomainRequest'];
export type UpdateDomain = Schemas['UpdateDomainRequest'];

export class DomainAlreadyRegistered extends Error {}

export class Domains {
  constructor(
    private readonly store: DomainStore,
    private readonly options: Pick<DomainOptions, 'bounceDomain' | 'mxHost'>,
  ) {}

  /** Registers a domain and makes its key; throws DomainAlreadyRegistered for a name taken. */
  async create(request: CreateDomain, now = new Date()): Promise<DomainRecord> {
    const name = request.name.toLowerCase();
    const key = await dkimKey();
    const at = now.toISOString();
    try {
      return await this.store.insert(
        {
          id: randomUUID(),
          name,
          status: 'not_started',
          record_status: '{}',
          region: request.region ?? 'us-east-1',
          return_path: (request.custom_return_path ?? 'send').toLowerCase(),
          open_tracking: request.open_tracking ? 1 : 0,
          click_tracking: request.click_tracking ? 1 : 0,
          tls: request.tls ?? 'opportunistic',
          tracking_subdomain: request.tracking_subdomain?.toLowerCase() ?? null,
          sending: request.capabilities?.sending ?? 'enabled',
          receiving: request.capabilities?.receiving ?? 'disabled',
          dkim_selector: DKIM_SELECTOR,
          dkim_private_key: key.privateKey,
          dkim_public_key: key.publicKey,
          dkim_next_selector: null,
          dkim_next_private_key: null,
          dkim_next_public_key: null,
          verified_at: null,
          next_check_at: null,
          created_at: at,
          updated_at: at,
        },
        this.describe,
      );
    } catch (error) {
      if ((await this.store.all()).some((domain) => domain.name === name)) throw new DomainAlreadyRegistered(name);
      throw error;
    }
  }

  /** Changes its settings; undefined if there is no such domain. */
  update(id: string, changes: UpdateDomain, now = new Date()): Promise<DomainRecord | undefined> {
    return this.store.update(
      id,
      () => ({
        ...(changes.open_tracking !== undefined && { open_tracking: changes.open_tracking ? 1 : 0 }),
        ...(changes.click_tracking !== undefined && { click_tracking: changes.click_tracking ? 1 : 0 }),
        ...(changes.tls !== undefined && { tls: changes.tls }),
        ...(changes.tracking_subdomain !== undefined && { tracking_subdomain: changes.tracking_subdomain.toLowerCase() }),
        ...(changes.capabilities?.sending !== undefined && { sending: changes.capabilities.sending }),
        ...(changes.capabilities?.receiving !== undefined && { receiving: changes.capabilities.receiving }),
      }),
      () => true,
      this.describe,
      now,
    );
  }

  delete(id: string, now = new Date()): Promise<boolean> {
    return this.store.delete(id, this.describe, now);
  }

  /**
   * Makes a new key under a selector of its own, to publish beside the one that signs now; the next
   * check that finds its record makes it the signing key. A rotation under way is replaced.
   */
  async rotateKey(id: string, now = new Date()): Promise<DomainRecord | undefined> {
    const key = await dkimKey();
    const selector = `${DKIM_SELECTOR}-${now.getTime().toString(36)}`;
    return this.store.update(
      id,
      () => ({ dkim_next_selector: selector, dkim_next_private_key: key.privateKey, dkim_next_public_key: key.publicKey }),
      () => true,
      this.describe,
      now,
    );
  }

  /** Asks for a check now: the domain and its records are `pending` until it is made. */
  startCheck(id: string, now = new Date()): Promise<DomainRecord | undefined> {
    return this.store.update(
      id,
      (domain) => {
        const pending = Object.fromEntries(this.recordsOf(domain).map((record) => [record.key, 'pending']));
        return { status: 'pending', record_status: JSON.stringify(pending), next_check_at: now.toISOString() };
      },
      changedStatus,
      this.describe,
      now,
    );
  }

  /**
   * Keeps what a check found, unless the claim it was made under (`claimedUntil`) was taken over;
   * `nextCheckAt` is when to look again. Returns the domain as kept, or undefined.
   */
  recordCheck(domain: DomainRecord, statuses: RecordStatuses, nextCheckAt: Date, now = new Date()): Promise<DomainRecord | undefined> {
    return this.store.update(
      domain.id,
      (current) => {
        // A check made before a rotation or a `verify` began is not theirs to settle.
        if (current.next_check_at !== domain.next_check_at || current.dkim_next_selector !== domain.dkim_next_selector) return undefined;
        const { dkim_next: next, ...rest } = statuses;
        // The rotated key's record is published: it signs from now on, and its record is the DKIM record.
        const promoted = next === 'verified' && current.dkim_next_selector !== null;
        const kept = promoted ? { ...rest, dkim: next } : statuses;
        const status = domainStatusOf(this.recordsOf(current), kept);
        return {
          status,
          record_status: JSON.stringify(kept),
          next_check_at: nextCheckAt.toISOString(),
          ...(status === 'verified' && { verified_at: now.toISOString() }),
          ...(promoted && {
            dkim_selector: current.dkim_next_selector!,
            dkim_private_key: current.dkim_next_private_key!,
            dkim_public_key: current.dkim_next_public_key!,
            dkim_next_selector: null,
            dkim_next_private_key: null,
            dkim_next_public_key: null,
          }),
        };
      },
      changedStatus,
      this.describe,
      now,
    );
  }

  recordsOf(domain: DomainRecordSource) {
    return recordsOf(domain, this.options);
  }

  /** The domain as answered (GET, and the answer to POST /domains). */
  toDomain(domain: DomainRecord): Schemas['Domain'] {
    return { object: 'domain', ...this.toSummary(domain), tls: domain.tls, records: wireRecords(this.recordsOf(domain), statusesOf(domain)) };
  }

  toSummary(domain: DomainRecord): Schemas['DomainSummary'] {
    const { id, name, status, created_at, region, sending, receiving, open_tracking, click_tracking, tracking_subdomain } = domain;
    return {
      id,
      name,
      status,
      created_at,
      region: region as Schemas['DomainRegion'],
      capabilities: { sending, receiving },
      open_tracking: open_tracking === 1,
      click_tracking: click_tracking === 1,
      ...(tracking_subdomain !== null && { tracking_subdomain }),
    };
  }

  /** What a `domain.*` event carries. */
  readonly describe = (domain: DomainRecord): Schemas['WebhookEventDomainData'] => {
    const { id, name, status, created_at, region } = domain;
    return { id, name, status, created_at, region: region as Schemas['DomainRegion'], records: wireRecords(this.recordsOf(domain), statusesOf(domain)) };
  };
}

/** A DKIM key pair: the private key as PKCS#8 PEM, the public one as base64 DER (SPKI), as `p=` gives it. */
async function dkimKey(): Promise<{ privateKey: string; publicKey: string }> {
  const { publicKey, privateKey } = await makeKeyPair('rsa', { modulusLength: DKIM_BITS });
  return { privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64') };
}

const statusesOf = (domain: Pick<DomainRecord, 'record_status'>) => JSON.parse(domain.record_status) as RecordStatuses;

/** Whether the domain's status or a record's changed: what `domain.updated` is sent for. */
const changedStatus = (before: DomainRecord, after: DomainRecord) => before.status !== after.status || before.record_status !== after.record_status || before.dkim_selector !== after.dkim_selector;
