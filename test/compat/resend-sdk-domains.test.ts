// The official `resend` SDK's domains, pointed at a live Mailroom by its base URL alone, on SQLite and
// PostgreSQL, with a real DNS server on loopback (test/support/dns.ts) holding what the domain's owner
// publishes: create, list, get, update, verify (to `verified`) and remove answer `data` of the SDK's
// own types, and errors in its error shape; an API key the SDK creates for one domain sends from it
// alone; a webhook gets `domain.created`, which the SDK's verify accepts.
import { pino } from 'pino';
import {
  Resend,
  type CreateApiKeyResponseSuccess,
  type CreateDomainResponseSuccess,
  type DomainCreatedEvent,
  type DomainRecords,
  type ErrorResponse,
  type GetDomainResponseSuccess,
  type ListDomainsResponseSuccess,
  type RemoveDomainsResponseSuccess,
  type UpdateDomainsResponseSuccess,
  type VerifyDomainsResponseSuccess,
} from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { WebhookDispatcher } from '../../server/webhooks/dispatch.ts';
import { backends } from '../support/backends.ts';
import { startDnsServer, type DnsServer } from '../support/dns.ts';
import { startReceiver, until } from '../support/receiver.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const uuid = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
const MX_HOST = 'mx.mailroom.test';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

describe.each(backends)('the resend SDK domains on %s', (backend) => {
  let server: TestServer;
  let dns: DnsServer;
  let resend: Resend;
  let n = 0;
  /** A name of its own for each test: the server and the zone are shared. */
  const fresh = () => `sdk${++n}-${backend}.example.com`;

  beforeAll(async () => {
    dns = await startDnsServer();
    const config = loadConfig({});
    server = await startTestServer(backend, {
      config: { domains: { ...config.domains, dnsServers: [dns.address], bounceDomain: 'bounces.mailroom.test', mxHost: MX_HOST }, webhooks: { ...config.webhooks, allowPrivate: true } },
    });
    resend = new Resend(server.apiKey, { baseUrl: server.url });
  });
  afterAll(async () => {
    await server?.close();
    await dns?.close();
  });

  /** Publishes the records as the SDK gave them, letter for letter, as the domain's owner would. */
  const publish = (name: string, records: DomainRecords[]) => {
    for (const record of records) {
      expect(record.type === 'TXT' || record.type === 'MX', `${record.record} ${record.type}`).toBe(true);
      dns.publish(`${record.name}.${name}`, { type: record.type as 'TXT' | 'MX', value: record.value, priority: 'priority' in record ? record.priority : undefined });
    }
  };
  /** Verifies through the SDK and waits for the check to end in `status`. */
  const verified = async (id: string, status = 'verified') => {
    const { data, error } = await resend.domains.verify(id);
    expect(error).toBeNull();
    const answer: VerifyDomainsResponseSuccess = data!;
    expect(answer).toEqual({ object: 'domain', id });
    await until(async () => (await resend.domains.get(id)).data?.status === status, `the domain ${status}`);
    return (await resend.domains.get(id)).data!;
  };

  it('creates, lists, gets, verifies, updates and removes a domain', async () => {
    const name = fresh();
    const created = await resend.domains.create({ name, customReturnPath: 'bounce', openTracking: true, region: 'eu-west-1' });
    expect(created.error).toBeNull();
    const domain: CreateDomainResponseSuccess = created.data!;
    expect(domain).toMatchObject({ id: uuid, name, status: 'not_started', created_at: timestamp, region: 'eu-west-1', capabilities: { sending: 'enabled', receiving: 'disabled' }, open_tracking: true, click_tracking: false });
    expect(domain.records).toEqual([
      { record: 'DKIM', name: 'mailroom._domainkey', type: 'TXT', value: expect.stringMatching(/^p=[A-Za-z0-9+/]+=*$/), ttl: 'Auto', status: 'not_started' },
      { record: 'SPF', name: 'bounce', type: 'TXT', value: 'v=spf1 mx ~all', ttl: 'Auto', status: 'not_started' },
      { record: 'SPF', name: 'bounce', type: 'MX', value: MX_HOST, ttl: 'Auto', priority: 10, status: 'not_started' },
      { record: 'DMARC', name: '_dmarc', type: 'TXT', value: 'v=DMARC1; p=none;', ttl: 'Auto', status: 'not_started' },
    ]);

    const listed = await resend.domains.list({ limit: 100 });
    expect(listed.error).toBeNull();
    const list: ListDomainsResponseSuccess = listed.data!;
    expect(list).toMatchObject({ object: 'list', has_more: false });
    expect(list.data.find((d) => d.id === domain.id)).toEqual({ id: domain.id, name, status: 'not_started', created_at: domain.created_at, region: 'eu-west-1', capabilities: { sending: 'enabled', receiving: 'disabled' }, open_tracking: true, click_tracking: false });

    const got = await resend.domains.get(domain.id);
    expect(got.error).toBeNull();
    const one: GetDomainResponseSuccess = got.data!;
    expect(one).toEqual({ ...domain, object: 'domain', tls: 'opportunistic' });

    // Nothing published: the check ends in `failed`, each record `failed`.
    expect((await verified(domain.id, 'failed')).records.map((r) => r.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
    publish(name, domain.records);
    const done = await verified(domain.id);
    expect(done.records.map((r) => [r.record, r.type, r.status])).toEqual([
      ['DKIM', 'TXT', 'verified'],
      ['SPF', 'TXT', 'verified'],
      ['SPF', 'MX', 'verified'],
      ['DMARC', 'TXT', 'verified'],
    ]);
    expect(await resend.emails.send({ from: `Acme <team@${name}>`, to: 'reader@example.net', subject: 'Hi', text: 'Hi' })).toMatchObject({ data: { id: uuid }, error: null });

    const updated = await resend.domains.update({ id: domain.id, clickTracking: true, openTracking: false, tls: 'enforced', trackingSubdomain: 'links' });
    expect(updated.error).toBeNull();
    const changed: UpdateDomainsResponseSuccess = updated.data!;
    expect(changed).toEqual({ object: 'domain', id: domain.id });
    expect((await resend.domains.get(domain.id)).data).toMatchObject({ status: 'verified', click_tracking: true, open_tracking: false, tls: 'enforced', tracking_subdomain: 'links' });

    const removed = await resend.domains.remove(domain.id);
    expect(removed.error).toBeNull();
    const gone: RemoveDomainsResponseSuccess = removed.data!;
    expect(gone).toEqual({ object: 'domain', id: domain.id, deleted: true });
    expect((await resend.domains.get(domain.id)).data).toBeNull();
    expect((await resend.domains.list({ limit: 100 })).data!.data.map((d) => d.id)).not.toContain(domain.id);
  });

  it('answers errors in the SDK shape: an unknown id, a name registered already, a from not verified', async () => {
    const notFound: ErrorResponse = { name: 'not_found', statusCode: 404, message: 'Domain not found' };
    for (const answer of [await resend.domains.get(UNKNOWN), await resend.domains.update({ id: UNKNOWN, clickTracking: true }), await resend.domains.verify(UNKNOWN), await resend.domains.remove(UNKNOWN)]) {
      expect(answer).toMatchObject({ data: null, error: notFound });
    }

    const name = fresh();
    expect((await resend.domains.create({ name })).error).toBeNull();
    const again = await resend.domains.create({ name: name.toUpperCase() });
    expect(again).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 422, message: `The domain \`${name}\` is registered already.` } });

    const refused = await resend.emails.send({ from: `team@${name}`, to: 'reader@example.net', subject: 'Hi', text: 'Hi' });
    expect(refused).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 403, message: expect.stringContaining(`The ${name} domain is not verified`) } });
  });

  it('creates an API key held to one domain, which sends from it and is refused elsewhere', async () => {
    const name = fresh();
    const { data: domain } = await resend.domains.create({ name });
    publish(name, domain!.records);
    await verified(domain!.id);

    const created = await resend.apiKeys.create({ name: `only ${name}`, permission: 'sending_access', domain_id: domain!.id });
    expect(created.error).toBeNull();
    const key: CreateApiKeyResponseSuccess = created.data!;
    expect(key).toEqual({ id: uuid, token: expect.stringMatching(/^re_/) });
    const restricted = new Resend(key.token, { baseUrl: server.url });
    const email = { to: 'reader@example.net', subject: 'Hi', text: 'Hi' };
    expect(await restricted.emails.send({ ...email, from: `Acme <team@${name}>` })).toMatchObject({ data: { id: uuid }, error: null });
    for (const from of [`team@elsewhere-${backend}.example.org`, `team@${fresh()}`]) {
      expect(await restricted.emails.send({ ...email, from })).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 403, message: expect.stringContaining('may send only from its own domain') } });
    }
    // Sending access only: the key cannot manage domains.
    expect((await restricted.domains.list()).error).toMatchObject({ statusCode: 401 });
    expect((await resend.apiKeys.create({ name: 'nowhere', domain_id: UNKNOWN })).error).toMatchObject({ name: 'validation_error', statusCode: 422 });
  });

  it('posts domain.created to a webhook, which the SDK verifies', async () => {
    const inbox = await startReceiver();
    const dispatcher = new WebhookDispatcher(server.store, pino({ level: 'silent' }), { ...server.config.webhooks, idleMs: 20 });
    try {
      const { data: webhook } = await resend.webhooks.create({ endpoint: inbox.url, events: ['domain.created'] });
      dispatcher.start();
      const name = fresh();
      const { data: domain } = await resend.domains.create({ name });
      await until(() => inbox.received.length === 1, 'the domain.created delivery');
      const [r] = inbox.received;
      const event = resend.webhooks.verify({
        payload: r!.body,
        headers: { id: String(r!.headers['svix-id']), timestamp: String(r!.headers['svix-timestamp']), signature: String(r!.headers['svix-signature']) },
        webhookSecret: webhook!.signing_secret,
      });
      expect(event.type).toBe('domain.created');
      const created = event as DomainCreatedEvent;
      expect(created.data).toEqual({
        id: domain!.id,
        name,
        status: 'not_started',
        created_at: domain!.created_at,
        region: 'us-east-1',
        records: domain!.records,
      });
    } finally {
      await dispatcher.stop();
      await inbox.close();
    }
  });
});
