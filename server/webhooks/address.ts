// Which IP addresses a webhook may be posted to: public unicast ones only. A webhook's endpoint is a
// URL that whoever holds an API key chooses, and the server posts to it from inside its own network:
// without these rules a key would reach the machine's loopback services, the private network around
// it and the cloud's metadata address (169.254.169.254), and read the answers back through
// `status_reason` and the timing of retries.
import { isIPv4, isIPv6 } from 'node:net';

/** What kind of address this is, worded for a message ("a loopback address"), or undefined when public. */
export function nonPublicKind(address: string): string | undefined {
  if (isIPv4(address)) return ipv4Kind(ipv4Number(address));
  if (isIPv6(address)) return ipv6Kind(ipv6Words(address));
  return 'not an IP address';
}

type Range = [first: number, bits: number, kind: string];

const IPV4: Range[] = [
  [ipv4Number('0.0.0.0'), 8, 'an unspecified address'],
  [ipv4Number('10.0.0.0'), 8, 'a private address'],
  [ipv4Number('100.64.0.0'), 10, 'a shared (carrier-grade NAT) address'],
  [ipv4Number('127.0.0.0'), 8, 'a loopback address'],
  [ipv4Number('169.254.0.0'), 16, 'a link-local address'],
  [ipv4Number('172.16.0.0'), 12, 'a private address'],
  [ipv4Number('192.0.0.0'), 24, 'a reserved address'],
  [ipv4Number('192.0.2.0'), 24, 'a documentation address'],
  [ipv4Number('192.88.99.0'), 24, 'a reserved address'],
  [ipv4Number('192.168.0.0'), 16, 'a private address'],
  [ipv4Number('198.18.0.0'), 15, 'a benchmarking address'],
  [ipv4Number('198.51.100.0'), 24, 'a documentation address'],
  [ipv4Number('203.0.113.0'), 24, 'a documentation address'],
  [ipv4Number('224.0.0.0'), 4, 'a multicast address'],
  [ipv4Number('240.0.0.0'), 4, 'a reserved address'],
];

function ipv4Kind(value: number): string | undefined {
  for (const [first, bits, kind] of IPV4) {
    if (value >>> (32 - bits) === first >>> (32 - bits)) return kind;
  }
  return undefined;
}

/**
 * IPv6: only global unicast (2000::/3) is public, less the ranges carved from it; addresses that carry
 * an IPv4 address (mapped, translated, 6to4) are judged by that address, since that is where a
 * connection to them ends up.
 */
function ipv6Kind(words: number[]): string | undefined {
  const [w0, w1, w2, w3, w4, w5] = words as [number, number, number, number, number, number];
  const embedded = (high: number, low: number) => ipv4Kind(((high << 16) | low) >>> 0);
  const zeroTo = (n: number) => words.slice(0, n).every((w) => w === 0);
  if (zeroTo(8)) return 'an unspecified address';
  if (zeroTo(7) && words[7] === 1) return 'a loopback address';
  if (zeroTo(5) && w5 === 0xffff) return embedded(words[6]!, words[7]!); // ::ffff:a.b.c.d, IPv4-mapped
  if (zeroTo(6)) return 'a reserved address'; // ::a.b.c.d, the deprecated IPv4-compatible form
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return embedded(words[6]!, words[7]!); // NAT64
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 1) return 'a private address'; // local-use NAT64
  if (w0 === 0x2002) return embedded(w1, w2); // 6to4
  if (w0 === 0x2001 && w1 === 0x0db8) return 'a documentation address';
  if (w0 === 0x2001 && w1 < 0x0200) return 'a reserved address'; // Teredo, ORCHID and other protocol assignments
  if (w0 === 0x3fff && w1 < 0x1000) return 'a documentation address';
  if ((w0 & 0xfe00) === 0xfc00) return 'a unique-local address';
  if ((w0 & 0xffc0) === 0xfe80) return 'a link-local address';
  if ((w0 & 0xffc0) === 0xfec0) return 'a private address'; // site-local, deprecated
  if ((w0 & 0xff00) === 0xff00) return 'a multicast address';
  if ((w0 & 0xe000) !== 0x2000) return 'a reserved address';
  return undefined;
}

function ipv4Number(address: string): number {
  return address.split('.').reduce((value, part) => value * 256 + Number(part), 0) >>> 0;
}

/** The eight 16-bit words of an IPv6 address in any valid spelling (`::`, a dotted IPv4 tail, a zone). */
function ipv6Words(address: string): number[] {
  let text = address.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = ipv4Number(dotted[1]!);
    text = `${text.slice(0, dotted.index)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string | undefined) => (part ? part.split(':').map((word) => parseInt(word, 16)) : []);
  const front = parse(head);
  const back = parse(tail);
  return tail === undefined ? front : [...front, ...Array(8 - front.length - back.length).fill(0), ...back];
}
