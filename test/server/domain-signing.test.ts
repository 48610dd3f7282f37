// A sending domain end to end, as the world sees it: the domain is registered through the API, exactly
// the records it answered are published on a real DNS server on loopback, it is verified, and an email
// from it goes out through a real SMTP relay on 127.0.0.1. The message the relay received is checked
// with mailauth, as a receiving server checks mail, asking the same DNS server: DKIM passes for the
// domain, DMARC passes by DKIM alignment, and the same message altered, or checked against another
// key, fails.
import { authenticate, type DNSResolver } from 'mailauth';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { backends } from '../support/backends.ts';
import { deliverOnce } from '../support/delivery.ts';
import { withDnsServer } from '../support/dns.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';
import { eventually } from './faults.ts';

const BOUNCE_DOMAIN = 'bounces.mailroom.test';
const MX_HOST = 'mx.mailroom.test';

interface WireRecord {
  record: string;
  name: string;
  type: 'TXT' | 'MX';
  value: string;
  priority?: number;
  status: string;
}

/** A DKIM-Signature header's tags, its value unfolded. */
function signatureTags(raw: string): Map<string, string> {
  const header = raw.split(/\r?\n\r?\n/)[0]!.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/).find((line) => /^dkim-signature:/i.test(line));
  expect(header, 'a DKIM-Signature header').toBeDefined();
  const tags = new Map<string, string>();
  for (const part of header!.slice(header!.indexOf(':') + 1).split(';')) {
    const at = part.indexOf('=');
    if (at > 0) tags.set(part.slice(0, at).trim(), part.slice(at + 1).replace(/\s+/g, ''));
  }
  return tags;
}

describe.each(backends)('a sending domain signs its mail, as receivers check it, on %s', (backend) => {
  const dns = withDnsServer();
  const sink = withSink();
  const server = withServer(backend, () => ({ config: { domains: { ...loadConfig({}).domains, dnsServers: [dns.address], bounceDomain: BOUNCE_DOMAIN, mxHost: MX_HOST } } }));
  // Under a real public suffix: DMARC finds the organisational domain by the public suffix list.
  const name = `acme-${backend}.example.com`;

  /** mailauth's resolver, asking the loopback DNS server: node's answers, and its ENOTFOUND and ENODATA. */
  const resolver: DNSResolver = (domain, rrtype) => dns.resolve(domain, rrtype) as ReturnType<DNSResolver>;
  /** The checks a receiving server makes of a message the relay got. */
  const check = (raw: string, sender: string) => authenticate(raw, { ip: '127.0.0.1', helo: 'relay.mailroom.test', sender, mta: 'mx.receiver.test', resolver });

  const send = (fields: Record<string, unknown> = {}) =>
    server.request('/emails', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ from: `Acme <team@${name}>`, to: 'reader@example.net', subject: 'Your receipt', text: 'Thanks for your order.', ...fields }),
    });
  /** Delivers what is due through the relay, as the server's delivery worker does, with a bounce domain. */
  const deliver = () => deliverOnce(server, sink, { bounceDomain: BOUNCE_DOMAIN });

  it('publishes what it answered, verifies, and sends mail that passes DKIM and DMARC for the domain', async () => {
    const created = await server.api('POST', '/domains', { name });
    expect(created).toMatchObject({ object: 'domain', name, status: 'not_started' });
    const records = created.records as WireRecord[];
    expect(records.map((r) => [r.record, r.name, r.type])).toEqual([
      ['DKIM', 'mailroom._domainkey', 'TXT'],
      ['SPF', 'send', 'TXT'],
      ['SPF', 'send', 'MX'],
      ['DMARC', '_dmarc', 'TXT'],
    ]);

    // Not verified yet: refused, naming the domain.
    const refused = await send();
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ statusCode: 403, name: 'validation_error', message: expect.stringContaining(`The ${name} domain is not verified`) });

    // Exactly what it answered, letter for letter, and nothing else.
    for (const record of records) dns.publish(`${record.name}.${name}`, { type: record.type, value: record.value, priority: record.priority });
    expect((await server.request(`/domains/${created.id}/verify`, { method: 'POST' })).status).toBe(200);
    await eventually(async () => (await server.api('GET', `/domains/${created.id}`)).status === 'verified', 'the domain verified', 200, 50);

    // One-click unsubscribe headers, which RFC 8058 wants covered by the signature.
    const accepted = await send({ headers: { 'List-Unsubscribe': `<https://${name}/unsubscribe/1>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } });
    expect(accepted.status).toBe(200);
    const { id } = await accepted.json();
    await deliver();
    await sink.waitFor(1);
    const got = sink.received.find((r) => r.mail.messageId === `<${id}@${name}>`);
    expect(got, 'the relay got the message').toBeDefined();
    const { raw, envelope } = got!;

    // The return path is on the domain's own return-path subdomain, where its SPF record is.
    expect(envelope.from).toMatch(new RegExp(`^bounces\\+${id}-[0-9a-f]{16}@send\\.${name.replaceAll('.', '\\.')}$`));

    const tags = signatureTags(raw);
    expect(tags.get('d')).toBe(name);
    expect(tags.get('s')).toBe('mailroom');
    expect(tags.get('c')).toBe('relaxed/relaxed');
    expect(tags.get('a')).toBe('rsa-sha256');
    const signed = tags.get('h')!.toLowerCase().split(':');
    for (const header of ['from', 'to', 'subject', 'date', 'message-id', 'list-unsubscribe', 'list-unsubscribe-post']) expect(signed).toContain(header);

    const result = await check(raw, envelope.from);
    expect(result.dkim.results).toHaveLength(1);
    const [dkim] = result.dkim.results;
    expect(dkim).toMatchObject({ signingDomain: name, selector: 'mailroom', status: { result: 'pass', aligned: name, header: { i: `@${name}`, s: 'mailroom', a: 'rsa-sha256' } } });
    // SPF: the return path's record (`mx ~all`) names the inbound MX host, which is not this loopback
    // relay, so SPF soft-fails; the record was found (without it the result is `none`).
    expect(result.spf).toMatchObject({ domain: `send.${name}`, status: { result: 'softfail' } });
    // DMARC passes on DKIM alignment alone.
    expect(result.dmarc).toMatchObject({ status: { result: 'pass', header: { from: 'example.com', d: name } }, p: 'none', alignment: { dkim: { result: name }, spf: { result: undefined } } });

    // The same message with its Subject changed no longer matches its signature.
    const altered = raw.replace(/^Subject: .*$/m, 'Subject: Your refund');
    expect(altered).not.toBe(raw);
    const forged = await check(altered, envelope.from);
    expect(forged.dkim.results[0]).toMatchObject({ signingDomain: name, status: { result: 'fail' } });
    expect(forged.dmarc).toMatchObject({ status: { result: 'fail' } });

    // The same message against another key published in the domain's name fails, as a wrong DKIM
    // record would make every message fail.
    const other = await server.api('POST', '/domains', { name: `other-${backend}.example.com` });
    const dkimName = `mailroom._domainkey.${name}`;
    dns.unpublish(dkimName);
    dns.publish(dkimName, { type: 'TXT', value: other.records[0].value });
    try {
      const wrongKey = await check(raw, envelope.from);
      expect(wrongKey.dkim.results[0]).toMatchObject({ signingDomain: name, status: { result: 'fail' } });
      expect(wrongKey.dmarc).toMatchObject({ status: { result: 'fail' } });
    } finally {
      dns.unpublish(dkimName);
      dns.publish(dkimName, { type: 'TXT', value: records[0]!.value });
    }
    // And with its key published again, the message passes again.
    expect((await check(raw, envelope.from)).dkim.results[0]!.status.result).toBe('pass');
  });
});
