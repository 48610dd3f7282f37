// Return paths (the envelope sender, where bounces go). With a bounce domain each recipient's copy of
// an email goes out with a return path of its own, `bounces+<email id>-<tag>@<bounce domain>`: the
// tag is an HMAC of the email's id and the recipient under the server's link secret, so only the
// server can make one, and a recipient sees only the one made for it. A report mailed to a return
// path is about that email and that recipient alone; nobody else's copy can be reported on by
// someone who does not hold it. Lower case only, since relays may fold the local part's case, and
// at most 64 characters, the longest local part (RFC 5321 4.5.3.1.1).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { linkSecret } from '../linkToken.ts';
import type { Store } from '../store/index.ts';

/** Hex characters of the tag: 64 bits, beyond guessing at one try per mail sent to the listener. */
const TAG_LENGTH = 16;

/** The setting that holds when return paths began to be signed; the migration that began it wrote it. */
export const SIGNED_SINCE_SETTING = 'return_paths_signed_since';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const SIGNED = new RegExp(`^bounces\\+(${UUID})-([0-9a-f]{${TAG_LENGTH}})@[^@]+$`, 'i');
const UNSIGNED = new RegExp(`^bounces\\+(${UUID})@[^@]+$`, 'i');

/** What an address says of itself as a return path: the email it names, and its tag unless it has none. */
export interface ReturnPathAddress {
  emailId: string;
  /** Undefined for an unsigned return path, as messages carried before return paths were signed. */
  tag: string | undefined;
}

export class ReturnPaths {
  private readonly key: Buffer;

  constructor(secret: Buffer) {
    // A key of its own, so that no tag can be taken for a link token's MAC or one for a tag.
    this.key = createHmac('sha256', secret).update('mailroom return-path v1\0').digest();
  }

  /** The return path of `recipient`'s copy of the email. */
  make(emailId: string, recipient: string, bounceDomain: string): string {
    return `bounces+${emailId.toLowerCase()}-${this.tag(emailId, recipient)}@${bounceDomain}`;
  }

  /** Which of the email's `recipients` this tag was made for; undefined if none. */
  recipientOf(address: ReturnPathAddress, recipients: string[]): string | undefined {
    if (address.tag === undefined) return undefined;
    const given = Buffer.from(address.tag.toLowerCase(), 'latin1');
    // Every recipient is compared, in time that does not depend on where the tags differ.
    let found: string | undefined;
    for (const recipient of recipients) {
      if (timingSafeEqual(given, Buffer.from(this.tag(address.emailId, recipient), 'latin1')) && found === undefined) found = recipient;
    }
    return found;
  }

  private tag(emailId: string, recipient: string): string {
    return createHmac('sha256', this.key).update(`${emailId.toLowerCase()}\0${recipient.toLowerCase()}`).digest('hex').slice(0, TAG_LENGTH);
  }
}

/** The email a return path names, and its tag, or undefined if the address is not a return path of ours. */
export function readReturnPath(address: string): ReturnPathAddress | undefined {
  const bare = address.trim().replace(/^<(.*)>$/, '$1');
  const signed = SIGNED.exec(bare);
  if (signed) return { emailId: signed[1]!.toLowerCase(), tag: signed[2]!.toLowerCase() };
  const unsigned = UNSIGNED.exec(bare);
  return unsigned ? { emailId: unsigned[1]!.toLowerCase(), tag: undefined } : undefined;
}

/** The server's return paths, signed with its link secret: UNSUBSCRIBE_SECRET, or the one kept in the store. */
export const returnPaths = async (store: Store, configured: string | undefined): Promise<ReturnPaths> => new ReturnPaths(await linkSecret(store, configured));
