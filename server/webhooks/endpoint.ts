// The rules a webhook's endpoint must meet when it is registered, and again at every delivery: an
// https URL, no credentials in it, and a host that is a public address. A host name cannot be judged
// when it is registered (its addresses can change at any time, to private ones on purpose: DNS
// rebinding), so it is resolved at each delivery and not connected to when any address is not public.
// WEBHOOK_ALLOW_PRIVATE=true lifts the rules on scheme and address, for development and private networks.
import { lookup as resolve, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP } from 'node:net';
import { nonPublicKind } from './address.ts';

const ALLOWED_BY = '(the server allows them with WEBHOOK_ALLOW_PRIVATE=true)';

/** Why this endpoint cannot be registered, or undefined when it can. */
export function endpointProblem(endpoint: string, allowPrivate: boolean): string | undefined {
  if (!URL.canParse(endpoint)) return 'The `endpoint` must be a valid URL.';
  const url = new URL(endpoint);
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) {
    return allowPrivate ? 'The `endpoint` must be an http or https URL.' : 'The `endpoint` must be an https URL (the server allows http with WEBHOOK_ALLOW_PRIVATE=true).';
  }
  if (!namesItsHost(endpoint)) return 'The `endpoint` must be written as the scheme, `//` and a host, such as `https://hooks.example.com/mailroom`.';
  // `https://@host` parses with an empty user name: any `@` before the host is refused.
  const authority = endpoint.slice(endpoint.indexOf('//') + 2).split(/[/?#\\]/, 1)[0]!;
  if (url.username || url.password || authority.includes('@')) return 'The `endpoint` must not hold a user name or password.';
  // Port 0 parses, but nothing can be reached at it: every delivery would fail until the webhook is disabled.
  if (url.port === '0') return 'The `endpoint` port must be from 1 to 65535.';
  if (allowPrivate) return undefined;
  const host = hostOf(url);
  const kind = hostKind(host);
  return kind && `The \`endpoint\` host ${host} is ${kind}; webhooks go only to public addresses ${ALLOWED_BY}.`;
}

/**
 * Whether a URL is written with its host right after `scheme://`. Parsers disagree on `https:///internal/x`:
 * WHATWG's reads the host `internal`, RFC 3986's no host at all, so what was checked may not be what
 * another reader of the stored URL reaches.
 */
export const namesItsHost = (url: string): boolean => /^[a-z][a-z\d+.-]*:\/\/[^/?#\\]/i.test(url);

/**
 * What is wrong with the host of a URL the server is about to post to, or undefined: the rules of
 * registration again (the setting may have changed since), short of resolving a name.
 */
export function hostProblem(url: URL, allowPrivate: boolean): string | undefined {
  if (allowPrivate) return undefined;
  if (url.protocol !== 'https:') return 'the endpoint is not https';
  const host = nonPublicHost(url);
  return host && `the endpoint host ${host}`;
}

/** How the URL's host is not a public address ("127.0.0.1 is a loopback address"), short of resolving a name. */
export function nonPublicHost(url: URL): string | undefined {
  const host = hostOf(url);
  const kind = hostKind(host);
  return kind && `${host} is ${kind}`;
}

/**
 * A `lookup` for node:http that resolves as usual but fails when any address of the name is not
 * public: connecting to the others would still let a name that answers with a private address now
 * and then reach it.
 */
export function publicOnlyLookup(hostname: string, options: { family?: number | string; all?: boolean; hints?: number }, callback: LookupCallback): void {
  const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0);
  const settings: LookupAllOptions = { all: true, family: family as 0 | 4 | 6, ...(options.hints !== undefined && { hints: options.hints }) };
  resolve(hostname, settings, (error, addresses) => {
    if (error) return callback(error, '', 0);
    const refused = addresses.find((entry) => nonPublicKind(entry.address));
    if (refused) {
      const problem = new Error(`${hostname} resolves to ${refused.address}, ${nonPublicKind(refused.address)}: not connecting`);
      return callback(Object.assign(problem, { code: 'ENOTPUBLIC' }), '', 0);
    }
    if (options.all) return (callback as (error: null, addresses: LookupAddress[]) => void)(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** The host as the URL parser wrote it (IPv4 in any spelling becomes dotted decimal), without brackets or a final dot. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '');
}

function hostKind(host: string): string | undefined {
  if (isIP(host)) return nonPublicKind(host);
  const name = host.toLowerCase();
  if (name === 'localhost' || name.endsWith('.localhost')) return 'this machine (`localhost`)';
  return undefined;
}
