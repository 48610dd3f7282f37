// Sending domains through the API, against a real DNS server on loopback (test/support/dns.ts): the
// records a new domain answers with, verification as the records are published, go missing or cannot
// be looked up, the `domain.*` events, and who may send from where.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { createKey } from '../../server/apiKeys/key.ts';
import { Senders } from '../../server/domains/senders.ts';
import { captureTransport } from '../../server/delivery/transport.ts';
import { backends } from '../support/backends.ts';
import { deliverOnce } from '../support/delivery.ts';
import { withDnsServer } from '../support/dns.ts';
import { startTestServer, withServer } from '../support/server.ts';
import { eventually } from './faults.ts';

const MX_HOST = 'mx.mailroom.test';

describe.each(backends)('domains on %s', (backend) => {
  const dns = withDnsServer();
  const server = withServer(backend, () => ({
    config: { domains: { ...loadConfig({}).domains, dnsServers: [dns.address], checkIntervalMs: 1000, bounceDomain: 'bounces.mailroom.test', mxHost: MX_HOST } },
  }));
  let n = 0;
  /** A name of its own for each test: the server and the zone are shared. */
  const fresh = () => `d${++n}-${backend}.example.com`;

  const create = async (name: string, extra: Record<string, unknown> = {}) => {
    const res = await server.request('/domains', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, ...extra }) });
    return { status: res.status, body: await res.json() };
  };
  const get = async (id: string) => server.api('GET', `/domains/${id}`);
  /** Publishes what the domain answered, letter for letter, as its owner would. */
  const publish = (domain: { name: string; records: { name: string; type: 'TXT' | 'MX'; value: string; priority?: number }[] }) => {
    for (const record of domain.records) dns.publish(`${record.name}.${domain.name}`, { type: record.type, value: record.value, priority: record.priority });
  };
  const verified = async (id: string, status = 'verified') => {
    expect((await server.request(`/domains/${id}/verify`, { method: 'POST' })).status).toBe(200);
    await eventually(async () => (await get(id)).status === status, `domain ${status}`, 200, 50);
    return get(id);
  };
  const domainEvents = async (id: string) =>
    (await server.store.database.db.selectFrom('events').select(['type', 'data']).where('type', 'in', ['domain.created', 'domain.updated', 'domain.deleted']).orderBy('id').execute())
      .map((event) => ({ type: event.type, data: JSON.parse(event.data!) }))
      .filter((event) => event.data.id === id);
  const send = (from: string, key = server.apiKey) =>
    fetch(`${server.url}/emails`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ from, to: 'someone@example.net', subject: 'Hi', text: 'Hi' }) });

  it('registers a domain with its own 2048-bit key, answering the records to publish and never the private key', async () => {
    const name = fresh();
    const { status, body } = await create(name.toUpperCase());
    expect(status).toBe(201);
    expect(body).toMatchObject({ object: 'domain', name, status: 'not_started', region: 'us-east-1', capabilities: { sending: 'enabled', receiving: 'disabled' }, open_tracking: false, click_tracking: false, tls: 'opportunistic' });
    expect(body.records.map((r: any) => [r.record, r.name, r.type, r.status])).toEqual([
      ['DKIM', 'mailroom._domainkey', 'TXT', 'not_started'],
      ['SPF', 'send', 'TXT', 'not_started'],
      ['SPF', 'send', 'MX', 'not_started'],
      ['DMARC', '_dmarc', 'TXT', 'not_started'],
    ]);
    expect(body.records[2]).toMatchObject({ value: MX_HOST, priority: 10 });
    const key = (await import('node:crypto')).createPublicKey({ key: Buffer.from(body.records[0].value.replace(/^p=/, ''), 'base64'), format: 'der', type: 'spki' });
    expect(key.asymmetricKeyDetails?.modulusLength).toBeGreaterThanOrEqual(2048);
    const stored = await server.store.domains.find(body.id);
    for (const answer of [body, await get(body.id), await server.api('GET', '/domains'), await domainEvents(body.id)]) {
      expect(JSON.stringify(answer)).not.toContain('PRIVATE KEY');
      expect(JSON.stringify(answer)).not.toContain(stored!.dkim_private_key.split('\n')[1]);
    }
    expect(JSON.stringify(server.logs)).not.toContain(stored!.dkim_private_key.split('\n')[1]);
    expect((await domainEvents(body.id)).map((e) => e.type)).toEqual(['domain.created']);

    expect(await create(name)).toMatchObject({ status: 422, body: { name: 'validation_error', message: `The domain \`${name}\` is registered already.` } });
    expect(await create('not a domain')).toMatchObject({ status: 422, body: { name: 'validation_error' } });
  });

  it('verifies a domain once its records are published as given, and fails it when its DKIM record disappears', async () => {
    const { body } = await create(fresh());
    expect((await verified(body.id, 'failed')).records.map((r: any) => r.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
    publish(body);
    const domain = await verified(body.id);
    expect(domain.records.map((r: any) => r.status)).toEqual(['verified', 'verified', 'verified', 'verified']);
    expect((await domainEvents(body.id)).map((e) => [e.type, e.data.status])).toEqual([
      ['domain.created', 'not_started'],
      ['domain.updated', 'pending'],
      ['domain.updated', 'failed'],
      ['domain.updated', 'pending'],
      ['domain.updated', 'verified'],
    ]);

    // Checked again on its own: the record gone, the domain fails, and says so.
    dns.unpublish(`mailroom._domainkey.${body.name}`);
    await eventually(async () => (await get(body.id)).status === 'failed', 'the domain failed', 300, 50);
    expect((await get(body.id)).records[0]).toMatchObject({ record: 'DKIM', status: 'failed' });
    expect((await domainEvents(body.id)).at(-1)).toMatchObject({ type: 'domain.updated', data: { status: 'failed', records: expect.arrayContaining([expect.objectContaining({ record: 'DKIM', status: 'failed' })]) } });
    expect((await send(`team@${body.name}`)).status).toBe(403);
  });

  it('counts a DKIM record with other tags and a key split in strings, and refuses one with another key', async () => {
    const { body } = await create(fresh());
    const other = (await create(fresh())).body;
    publish({ ...body, records: body.records.filter((r: any) => r.record !== 'DKIM') });
    dns.publish(`mailroom._domainkey.${body.name}`, { type: 'TXT', value: other.records[0].value });
    expect((await verified(body.id, 'failed')).records[0].status).toBe('failed');
    dns.unpublish(`mailroom._domainkey.${body.name}`);
    dns.publish(`mailroom._domainkey.${body.name}`, { type: 'TXT', value: `v=DKIM1; k=rsa; ${body.records[0].value}` });
    expect((await verified(body.id)).records[0].status).toBe('verified');
  });

  it('is temporary_failure when the DNS server fails, and verified once it answers again', async () => {
    const { body } = await create(fresh());
    publish(body);
    dns.failing.add(`mailroom._domainkey.${body.name}`);
    const domain = await verified(body.id, 'temporary_failure');
    expect(domain.records[0].status).toBe('temporary_failure');
    dns.failing.delete(`mailroom._domainkey.${body.name}`);
    expect((await verified(body.id)).status).toBe('verified');
  });

  it('lists, changes the settings of, and deletes domains, each change an event', async () => {
    const { body } = await create(fresh(), { custom_return_path: 'bounce', open_tracking: true, region: 'eu-west-1' });
    expect(body.records[1]).toMatchObject({ name: 'bounce', type: 'TXT' });
    expect(await server.api('PATCH', `/domains/${body.id}`, { click_tracking: true, tracking_subdomain: 'Links', tls: 'enforced', capabilities: { receiving: 'enabled' } })).toEqual({ object: 'domain', id: body.id });
    expect(await get(body.id)).toMatchObject({ open_tracking: true, click_tracking: true, tracking_subdomain: 'links', tls: 'enforced', region: 'eu-west-1', capabilities: { sending: 'enabled', receiving: 'enabled' } });
    const list = await server.api('GET', '/domains?limit=100');
    expect(list.data.find((d: any) => d.id === body.id)).toEqual({ id: body.id, name: body.name, status: 'not_started', created_at: body.created_at, region: 'eu-west-1', capabilities: { sending: 'enabled', receiving: 'enabled' }, open_tracking: true, click_tracking: true, tracking_subdomain: 'links' });
    expect(await server.api('DELETE', `/domains/${body.id}`)).toEqual({ object: 'domain', id: body.id, deleted: true });
    expect(await server.api('GET', `/domains/${body.id}`)).toMatchObject({ statusCode: 404, name: 'not_found', message: 'Domain not found' });
    expect(await server.api('DELETE', `/domains/${body.id}`)).toMatchObject({ statusCode: 404 });
    expect(await server.api('POST', `/domains/${body.id}/verify`)).toMatchObject({ statusCode: 404 });
    expect((await domainEvents(body.id)).map((e) => e.type)).toEqual(['domain.created', 'domain.updated', 'domain.deleted']);
  });

  it('refuses a from on a registered domain until it is verified, sends from one never registered with one warning, and holds a restricted key to its domain', async () => {
    const { body } = await create(fresh());
    const refused = await send(`Team <team@${body.name.toUpperCase()}>`);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ statusCode: 403, name: 'validation_error', message: expect.stringContaining(`The ${body.name} domain is not verified`) });
    const batch = await server.request('/emails/batch', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify([{ from: 'a@elsewhere.example', to: 'x@example.net', subject: 'Hi', text: 'Hi' }, { from: `a@${body.name}`, to: 'x@example.net', subject: 'Hi', text: 'Hi' }]) });
    expect(batch.status).toBe(403);
    publish(body);
    await verified(body.id);
    const accepted = await send(`team@${body.name}`);
    expect(accepted.status).toBe(200);
    // Kept signed by the capture transport, as a relay would get it.
    const { id } = await accepted.json();
    await deliverOnce(server, captureTransport);
    const raw = await (await server.request(`/emails/${id}/raw`)).text();
    expect(raw.replace(/\r\n[ \t]+/g, ' ')).toMatch(new RegExp(`^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=${body.name.replaceAll('.', '\\.')}; `));

    const unregistered = `never-${backend}.example.org`;
    expect((await send(`a@${unregistered}`)).status).toBe(200);
    expect((await send(`b@${unregistered}`)).status).toBe(200);
    expect(server.logs.filter((line) => line.domain === unregistered && line.level === 40)).toHaveLength(1);

    const keyRes = await server.request('/api-keys', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'one domain', permission: 'sending_access', domain_id: body.id }) });
    expect(keyRes.status).toBe(201);
    const { token } = await keyRes.json();
    expect((await send(`team@${body.name}`, token)).status).toBe(200);
    const elsewhere = await send(`a@${unregistered}`, token);
    expect(elsewhere.status).toBe(403);
    expect(await elsewhere.json()).toMatchObject({ name: 'validation_error', message: expect.stringContaining('may send only from its own domain') });
    expect((await server.api('GET', '/api-keys')).data.find((k: any) => k.name === 'one domain')).toMatchObject({ domain_id: body.id, permission: 'sending_access' });
    expect(await server.api('POST', '/api-keys', { name: 'x', domain_id: '00000000-0000-4000-8000-000000000000' })).toMatchObject({ statusCode: 422, message: expect.stringContaining('does not exist') });
  });

  it('rotates a key: the one in use signs until the new one is published and found, which then takes over', async () => {
    const { body } = await create(fresh());
    publish(body);
    await verified(body.id);
    const signer = async () => (await new Senders(server.store.domains, { requireRegistered: false, bounceDomain: undefined }).identity(`a@${body.name}`)).dkim;
    const first = await signer();
    expect(first).toMatchObject({ domainName: body.name, keySelector: 'mailroom' });

    const rotating = await server.api('POST', `/domains/${body.id}/dkim-key/rotate`);
    expect(rotating.status).toBe('verified');
    const dkim = rotating.records.filter((r: any) => r.record === 'DKIM');
    expect(dkim.map((r: any) => r.status)).toEqual(['verified', 'not_started']);
    expect(dkim[1].name).toMatch(/^mailroom-[0-9a-z]+\._domainkey$/);
    expect(dkim[1].value).not.toBe(dkim[0].value);
    expect(JSON.stringify(rotating)).not.toContain('PRIVATE KEY');
    // Not yet published: a check leaves the key in use signing, and the domain verified.
    expect((await verified(body.id)).records.filter((r: any) => r.record === 'DKIM').map((r: any) => r.status)).toEqual(['verified', 'failed']);
    expect(await signer()).toEqual(first);
    expect((await send(`team@${body.name}`)).status).toBe(200);

    dns.publish(`${dkim[1].name}.${body.name}`, { type: 'TXT', value: dkim[1].value });
    const rotated = await verified(body.id);
    expect(rotated.records.filter((r: any) => r.record === 'DKIM')).toEqual([{ ...dkim[1], status: 'verified' }]);
    const now = await signer();
    expect(now).toMatchObject({ domainName: body.name, keySelector: dkim[1].name.replace('._domainkey', '') });
    expect(now!.privateKey).not.toBe(first!.privateKey);
    expect((await domainEvents(body.id)).at(-1)).toMatchObject({ type: 'domain.updated', data: { status: 'verified', records: expect.arrayContaining([expect.objectContaining({ name: dkim[1].name })]) } });
    expect(await server.api('POST', '/domains/00000000-0000-4000-8000-000000000000/dkim-key/rotate')).toMatchObject({ statusCode: 404 });
  });

  it('sends a broadcast from a registered domain only once it is verified', async () => {
    const { body } = await create(fresh());
    const segment = await server.api('POST', '/segments', { name: `news ${body.name}` });
    const broadcast = await server.api('POST', '/broadcasts', { segment_id: segment.id, from: `News <news@${body.name}>`, subject: 'News', text: 'News' });
    const refused = await server.request(`/broadcasts/${broadcast.id}/send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ name: 'validation_error', message: expect.stringContaining(`The ${body.name} domain is not verified`) });
    expect((await server.api('GET', `/broadcasts/${broadcast.id}`)).status).toBe('draft');
    const atOnce = await server.request('/broadcasts', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ segment_id: segment.id, from: `news@${body.name}`, subject: 'News', text: 'News', send: true }) });
    expect(atOnce.status).toBe(403);
    publish(body);
    await verified(body.id);
    expect(await server.api('POST', `/broadcasts/${broadcast.id}/send`, {})).toEqual({ object: 'broadcast', id: broadcast.id });
  });

  it('needs no SPF record on the return path when the server receives no bounces: mail then leaves from the From address', async () => {
    const plain = await startTestServer(backend, { config: { domains: { ...loadConfig({}).domains, dnsServers: [dns.address] } } });
    try {
      const name = fresh();
      const domain = await (await fetch(`${plain.url}/domains`, { method: 'POST', headers: { authorization: `Bearer ${plain.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ name }) })).json();
      expect(domain.records.map((r: any) => `${r.record} ${r.type}`)).toEqual(['DKIM TXT', 'SPF TXT', 'DMARC TXT']);
      dns.publish(`mailroom._domainkey.${name}`, { type: 'TXT', value: domain.records[0].value });
      await plain.api('POST', `/domains/${domain.id}/verify`);
      await eventually(async () => (await plain.api('GET', `/domains/${domain.id}`)).status === 'verified', 'verified by DKIM alone', 200, 50);
      expect((await plain.api('GET', `/domains/${domain.id}`)).records.map((r: any) => r.status)).toEqual(['verified', 'failed', 'failed']);
    } finally {
      await plain.close();
    }
  });

  it('refuses a from on a domain never registered when the server requires registered domains', async () => {
    const strict = await startTestServer(backend, { config: { domains: { ...loadConfig({}).domains, requireRegistered: true } } });
    try {
      const res = await fetch(`${strict.url}/emails`, { method: 'POST', headers: { authorization: `Bearer ${strict.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ from: 'a@unknown.example', to: 'x@example.net', subject: 'Hi', text: 'Hi' }) });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ name: 'validation_error', message: expect.stringContaining('The unknown.example domain is not registered') });
      const { key } = await createKey(strict.store, 'sender', 'sending_access');
      expect((await fetch(`${strict.url}/emails`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{}' })).status).toBe(422);
    } finally {
      await strict.close();
    }
    expect(loadConfig({ NODE_ENV: 'production' }).domains.requireRegistered).toBe(true);
    expect(loadConfig({ NODE_ENV: 'production', REQUIRE_VERIFIED_DOMAIN: 'false' }).domains.requireRegistered).toBe(false);
    expect(loadConfig({ REQUIRE_VERIFIED_DOMAIN: 'true' }).domains.requireRegistered).toBe(true);
    expect(loadConfig({}).domains.requireRegistered).toBe(false);
  });
});
