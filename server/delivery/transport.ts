// Where messages go: an SMTP relay (pooled connections) when SMTP_URL is set, else the embedded
// capture transport, which keeps the raw MIME in the store and counts the email as delivered.
import { createTransport, type SendMailOptions } from 'nodemailer';

export interface Transport {
  /** Sends one message; resolves with its raw MIME when the transport keeps it. */
  send(message: SendMailOptions): Promise<{ raw?: string }>;
  close(): void;
}

export function smtpTransport(smtpUrl: string, maxConnections = 5): Transport {
  const url = new URL(smtpUrl);
  if (!url.searchParams.has('pool')) url.searchParams.set('pool', 'true');
  if (!url.searchParams.has('maxConnections')) url.searchParams.set('maxConnections', String(maxConnections));
  const transporter = createTransport(url.toString());
  return {
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
