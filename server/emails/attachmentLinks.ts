// The link an attachment of a sent email is downloaded from (`PUBLIC_URL/attachments/TOKEN`), as
// Resend's `download_url`: it works without an API key, so the token names the email, the attachment
// and when the link expires, with an HMAC-SHA256 of all three under the server's link secret (the one
// unsubscribe links use, in a context of its own). Changing any byte, or waiting past the time, makes
// it fail; nothing is stored per link.
import { LinkTokens, uuidBytes, uuidText } from '../linkToken.ts';

/** How long a link works: an hour, as a signed URL of Resend's storage does; asking again gives a new one. */
export const DOWNLOAD_LINK_MS = 3600_000;

export interface AttachmentLink {
  url: string;
  expiresAt: Date;
}

export class AttachmentLinks {
  private readonly tokens: LinkTokens;

  constructor(
    secret: Buffer,
    /** Read when a link is made: a server on port 0 learns its own URL only once it listens. */
    private readonly publicUrl: () => string,
  ) {
    this.tokens = new LinkTokens(secret, 'mailroom attachment download v1', 16 + 16 + 4);
  }

  linkTo(emailId: string, attachmentId: string, now: Date): AttachmentLink {
    // Whole seconds, as the token holds them.
    const expires = Math.floor((now.getTime() + DOWNLOAD_LINK_MS) / 1000);
    const seconds = Buffer.alloc(4);
    seconds.writeUInt32BE(expires);
    const payload = Buffer.concat([uuidBytes(emailId), uuidBytes(attachmentId), seconds]);
    return { url: `${this.publicUrl()}/attachments/${this.tokens.seal(payload)}`, expiresAt: new Date(expires * 1000) };
  }

  /** The attachment the token names, or undefined if this secret did not sign it or it has expired. */
  verify(token: string, now: Date): { emailId: string; attachmentId: string } | undefined {
    const payload = this.tokens.open(token);
    if (!payload || payload.readUInt32BE(32) * 1000 <= now.getTime()) return undefined;
    return { emailId: uuidText(payload.subarray(0, 16)), attachmentId: uuidText(payload.subarray(16, 32)) };
  }
}
