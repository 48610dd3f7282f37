// Where messages go: an SMTP relay (pooled connections) when SMTP_URL is set, else the embedded
// capture transport, which keeps the raw MIME in the store and counts the email as delivered.
// A relay that accepts a message has sent it on, not delivered it: the relay is not the recipient,
// unless the operator says it is (SMTP_FINAL, for a relay that is the recipients' own server).
import { createTransport, type SendMailOptions } from 'nodemailer';

export interface Transport {
  /** Whether a message it accepts has reached its recipients: then `delivered` comes with `sent`. */
  readonly final: boolean;
  /** Sends one message; resolves with its raw MIME when the transport keeps it. */
  send(message: SendMailOptions): Promise<{ raw?: string }>;
  close(): void;
}

export function smtpTransport(smtpUrl: string, { final = false, maxConnections = 5 }: { final?: boolean; maxConnections?: number } = {}): Transport {
  const url = new URL(smtpUrl);
  if (!url.searchParams.has('pool')) url.searchParams.set('pool', 'true');
  if (!url.searchParams.has('maxConnections')) url.searchParams.set('maxConnections', String(maxConnections));
  const transporter = createTransport(url.toString());
  return {
    final,
    send: async (message) => {
      await transporter.sendMail(message);
      return {};
    },
    close: () => transporter.close(),
  };
}

export function captureTransport(): Transport {
  const transporter = createTransport({ streamTransport: true, buffer: true, newline: 'windows' });
  return {
    final: true,
    send: async (message) => {
      const info = await transporter.sendMail(message);
      return { raw: (info.message as Buffer).toString('utf8') };
    },
    close: () => transporter.close(),
  };
}

/** A 5xx reply is the relay's final word; anything else (4xx, a dropped connection) may pass on retry. */
export function isPermanent(error: unknown): boolean {
  const code = (error as { responseCode?: number }).responseCode;
  return typeof code === 'number' && code >= 500 && code < 600;
}
