// The tokens in links that work without an API key (unsubscribe links, attachment downloads): a
// fixed-length payload followed by its HMAC-SHA256 under the server's link secret, in base64url.
// Each kind of link signs in a context of its own, so a token of one kind is never valid as another.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Store } from './store/index.ts';
import { UUID_FORM } from './store/timeOrderedId.ts';

const MAC_BYTES = 32;

/** The setting that holds the generated secret when UNSUBSCRIBE_SECRET is not set. */
export const SECRET_SETTING = 'unsubscribe_secret';

export class LinkTokens {
  private readonly context: Buffer;

  constructor(
    private readonly secret: Buffer,
    context: string,
    private readonly payloadBytes: number,
  ) {
    this.context = Buffer.from(`${context}\0`);
  }

  seal(payload: Buffer): string {
    if (payload.length !== this.payloadBytes) throw new Error(`a payload of ${payload.length} bytes, not ${this.payloadBytes}`);
    return Buffer.concat([payload, this.mac(payload)]).toString('base64url');
  }

  /** The payload this secret sealed in the token, or undefined if it did not. */
  open(token: string): Buffer | undefined {
    if (!/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
    const bytes = Buffer.from(token, 'base64url');
    // Only the canonical spelling: otherwise trailing bits would give one token several valid forms.
    if (bytes.length !== this.payloadBytes + MAC_BYTES || bytes.toString('base64url') !== token) return undefined;
    const payload = bytes.subarray(0, this.payloadBytes);
    return timingSafeEqual(bytes.subarray(this.payloadBytes), this.mac(payload)) ? payload : undefined;
  }

  private mac(payload: Buffer): Buffer {
    return createHmac('sha256', this.secret).update(this.context).update(payload).digest();
  }
}

/**
 * The secret links are signed with: UNSUBSCRIBE_SECRET when set, else one generated once and kept
 * in the store. Insert-if-absent, then read: processes starting together on one database all end up
 * with the first one written, and a restart keeps it, so old links keep working.
 */
export async function linkSecret(store: Store, configured: string | undefined): Promise<Buffer> {
  if (configured !== undefined) return Buffer.from(configured, 'utf8');
  return Buffer.from(await store.settings.keep(SECRET_SETTING, randomBytes(32).toString('base64url')), 'base64url');
}

/** A UUID packed as its 16 bytes, to keep URLs short. */
export function uuidBytes(id: string): Buffer {
  if (!UUID_FORM.test(id)) throw new Error(`not a UUID: ${id}`);
  return Buffer.from(id.replaceAll('-', ''), 'hex');
}

export function uuidText(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
