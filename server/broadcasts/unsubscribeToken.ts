// The token in a broadcast email's unsubscribe URL (`PUBLIC_URL/unsubscribe/TOKEN`). It names the
// contact and what the link unsubscribes from (the broadcast's topic, or, for a broadcast without
// one, everything, recorded as the broadcast's id), and carries an HMAC-SHA256 of both under the
// server's secret: without the secret no token can be made, and changing any byte of one (another
// contact, another topic) makes it fail. Ids are UUIDs, packed as 16 bytes each to keep URLs short.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Store } from '../store/index.ts';
import { UUID_FORM } from '../store/timeOrderedId.ts';

export interface UnsubscribeTarget {
  contactId: string;
  /** `topic`: opt the contact out of this topic; `broadcast`: unsubscribe it from everything. */
  scope: 'topic' | 'broadcast';
  /** The topic's id, or the broadcast's. */
  id: string;
}

const SCOPES = ['topic', 'broadcast'] as const;
const MAC_BYTES = 32;
const PAYLOAD_BYTES = 1 + 16 + 16;
// Keeps these MACs apart from anything else the same secret might ever sign.
const CONTEXT = Buffer.from('mailroom unsubscribe v1\0');

/** The setting that holds the generated secret when UNSUBSCRIBE_SECRET is not set. */
export const SECRET_SETTING = 'unsubscribe_secret';

export class UnsubscribeTokens {
  constructor(private readonly secret: Buffer) {}

  sign(target: UnsubscribeTarget): string {
    const payload = Buffer.concat([Buffer.of(SCOPES.indexOf(target.scope) + 1), uuidBytes(target.contactId), uuidBytes(target.id)]);
    return Buffer.concat([payload, this.mac(payload)]).toString('base64url');
  }

  /** What the token names, or undefined if it is not one this secret signed. */
  verify(token: string): UnsubscribeTarget | undefined {
    if (!/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
    const bytes = Buffer.from(token, 'base64url');
    // Only the canonical spelling: otherwise trailing bits would give one token several valid forms.
    if (bytes.length !== PAYLOAD_BYTES + MAC_BYTES || bytes.toString('base64url') !== token) return undefined;
    const payload = bytes.subarray(0, PAYLOAD_BYTES);
    if (!timingSafeEqual(bytes.subarray(PAYLOAD_BYTES), this.mac(payload))) return undefined;
    const scope = SCOPES[payload[0]! - 1];
    if (!scope) return undefined;
    return { scope, contactId: uuidText(payload.subarray(1, 17)), id: uuidText(payload.subarray(17, 33)) };
  }

  private mac(payload: Buffer): Buffer {
    return createHmac('sha256', this.secret).update(CONTEXT).update(payload).digest();
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

/**
 * The secret the server's links are signed with (unsubscribe links, and attachment downloads in a
 * context of their own): UNSUBSCRIBE_SECRET when set, else one generated once and kept in the store.
 * Insert-if-absent, then read: processes starting together on one database all end up with the
 * first one written, and a restart keeps it, so old links keep working.
 */
export async function linkSecret(store: Store, configured: string | undefined): Promise<Buffer> {
  if (configured !== undefined) return Buffer.from(configured, 'utf8');
  return Buffer.from(await store.settings.keep(SECRET_SETTING, randomBytes(32).toString('base64url')), 'base64url');
}

export const unsubscribeTokens = async (store: Store, configured: string | undefined): Promise<UnsubscribeTokens> => new UnsubscribeTokens(await linkSecret(store, configured));

export function uuidBytes(id: string): Buffer {
  if (!UUID_FORM.test(id)) throw new Error(`not a UUID: ${id}`);
  return Buffer.from(id.replaceAll('-', ''), 'hex');
}

export function uuidText(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
