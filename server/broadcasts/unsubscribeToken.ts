// The token in a broadcast email's unsubscribe URL (`PUBLIC_URL/unsubscribe/TOKEN`). It names the
// contact and what the link unsubscribes from (the broadcast's topic, or, for a broadcast without
// one, everything, recorded as the broadcast's id), and carries an HMAC-SHA256 of both under the
// server's secret: without the secret no token can be made, and changing any byte of one (another
// contact, another topic) makes it fail. Ids are UUIDs, packed as 16 bytes each to keep URLs short.
import type { Store } from '../store/index.ts';
import { LinkTokens, linkSecret, uuidBytes, uuidText } from '../linkToken.ts';

export interface UnsubscribeTarget {
  contactId: string;
  /** `topic`: opt the contact out of this topic; `broadcast`: unsubscribe it from everything. */
  scope: 'topic' | 'broadcast';
  /** The topic's id, or the broadcast's. */
  id: string;
}

const SCOPES = ['topic', 'broadcast'] as const;

export class UnsubscribeTokens {
  private readonly tokens: LinkTokens;

  constructor(secret: Buffer) {
    this.tokens = new LinkTokens(secret, 'mailroom unsubscribe v1', 1 + 16 + 16);
  }

  sign(target: UnsubscribeTarget): string {
    return this.tokens.seal(Buffer.concat([Buffer.of(SCOPES.indexOf(target.scope) + 1), uuidBytes(target.contactId), uuidBytes(target.id)]));
  }

  /** What the token names, or undefined if it is not one this secret signed. */
  verify(token: string): UnsubscribeTarget | undefined {
    const payload = this.tokens.open(token);
    const scope = payload && SCOPES[payload[0]! - 1];
    if (!payload || !scope) return undefined;
    return { scope, contactId: uuidText(payload.subarray(1, 17)), id: uuidText(payload.subarray(17, 33)) };
  }
}

/** The URL that unsubscribes `target`, under the server's public URL (which has no trailing slash). */
export const unsubscribeUrl = (publicUrl: string, tokens: UnsubscribeTokens, target: UnsubscribeTarget): string =>
  `${publicUrl}/unsubscribe/${tokens.sign(target)}`;

/** The server's own URL, for when PUBLIC_URL is not set; a wildcard address is reached on loopback. */
export function defaultPublicUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
  return `http://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

export const unsubscribeTokens = async (store: Store, configured: string | undefined): Promise<UnsubscribeTokens> => new UnsubscribeTokens(await linkSecret(store, configured));
