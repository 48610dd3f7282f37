// A real DNS server on 127.0.0.1 (dns2, over UDP), authoritative for whatever a test publishes: TXT
// and MX records by full name. A name with no records answers NXDOMAIN; a name with records of other
// types answers with none (NODATA); `failing` names answer SERVFAIL, as a broken resolver would.
// Servers under test find it through DNS_SERVERS; mailauth, as a receiving server, through its resolver.
import type { AddressInfo } from 'node:net';
import dns2 from 'dns2';
import { forTheBlock } from './suite.ts';

const { Packet } = dns2;

export interface PublishedRecord {
  type: 'TXT' | 'MX';
  value: string;
  priority?: number;
}

export interface DnsServer {
  /** `127.0.0.1:<port>`, as DNS_SERVERS takes it. */
  address: string;
  port: number;
  /** Records by lower-cased full name, without the trailing dot. */
  zone: Map<string, PublishedRecord[]>;
  failing: Set<string>;
  publish(name: string, record: PublishedRecord): void;
  unpublish(name: string, type?: PublishedRecord['type']): void;
  /** TXT and MX look-ups as node's resolver answers them, for mailauth's `resolver` option. */
  resolve(name: string, type: string): Promise<unknown[]>;
  close(): Promise<void>;
}

const RCODE = { noError: 0, serverFailure: 2, nameError: 3 };

export async function startDnsServer(): Promise<DnsServer> {
  const zone = new Map<string, PublishedRecord[]>();
  const failing = new Set<string>();
  const server = dns2.createServer({
    udp: true,
    handle: (request: any, send: (response: any) => void) => {
      const response = Packet.createResponseFromRequest(request);
      const [question] = request.questions;
      const name = String(question.name).toLowerCase().replace(/\.$/, '');
      response.header.aa = 1;
      if (failing.has(name)) {
        response.header.rcode = RCODE.serverFailure;
        return send(response);
      }
      const records = zone.get(name);
      // Plain objects, as dns2's own examples answer; its types ask for parsed Resource instances.
      const answers = response.answers as object[];
      if (!records) response.header.rcode = RCODE.nameError;
      for (const record of records ?? []) {
        if (record.type === 'TXT' && question.type === Packet.TYPE.TXT) {
          // A TXT value longer than 255 octets goes as several strings, as DNS providers publish it.
          // dns2 encodes an array as one string each.
          const chunks = record.value.match(/.{1,255}/gs) ?? [''];
          answers.push({ name: question.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 60, data: chunks });
        }
        if (record.type === 'MX' && question.type === Packet.TYPE.MX) {
          answers.push({ name: question.name, type: Packet.TYPE.MX, class: Packet.CLASS.IN, ttl: 60, exchange: record.value, priority: record.priority ?? 10 });
        }
      }
      send(response);
    },
  });
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const { port } = server.addresses().udp as AddressInfo;
  const address = `127.0.0.1:${port}`;
  const { Resolver } = await import('node:dns/promises');
  const resolver = new Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([address]);
  const key = (name: string) => name.toLowerCase().replace(/\.$/, '');
  return {
    address,
    port,
    zone,
    failing,
    publish: (name, record) => zone.set(key(name), [...(zone.get(key(name)) ?? []), record]),
    unpublish: (name, type) => {
      const kept = (zone.get(key(name)) ?? []).filter((record) => type !== undefined && record.type !== type);
      if (kept.length > 0) zone.set(key(name), kept);
      else zone.delete(key(name));
    },
    resolve: (name, type) => resolver.resolve(name, type as 'TXT') as Promise<unknown[]>,
    close: () => server.close(),
  };
}

/** A DNS server for the describe block: listening before its tests, closed after them. */
export function withDnsServer(): DnsServer {
  return forTheBlock('the DNS server', startDnsServer, async (dns) => dns.close());
}
