// A real SMTP server on 127.0.0.1 (smtp-server) that parses what it receives with mailparser, and can
// be told to refuse messages, or single recipients, to test a relay that says "try later" or "never".
// It advertises DSN (RFC 3461), and keeps the DSN parameters each message came with.
import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';
import { forTheBlock } from './suite.ts';
import { until, WAIT_MS } from './until.ts';

export interface Received {
  mail: ParsedMail;
  raw: string;
  envelope: { from: string; to: string[]; dsn: { ret?: string | null; envid?: string | null } | undefined; rcptDsn: ({ notify?: string[]; orcpt?: string } | undefined)[] };
}

export interface SmtpSink {
  url: string;
  received: Received[];
  /** Decides each message's fate: undefined accepts it, a number refuses it with that reply code (and `text`, if given). */
  refuse: (attempt: number) => number | { code: number; text: string } | undefined;
  /** Decides each recipient's fate at RCPT TO: undefined accepts it, a number refuses it with that reply code. */
  refuseRecipient: (address: string) => number | undefined;
  /** Whether to take the message and never answer it, as a hung relay: the client must give up. */
  hang: (attempt: number) => boolean;
  /** Waits until `count` messages have arrived (giving up after WAIT_MS, or `timeoutMs`). */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSmtpSink(options: { delayMs?: number } = {}): Promise<SmtpSink> {
  let attempts = 0;
  const sink: SmtpSink = {
    url: '',
    received: [],
    refuse: () => undefined,
    refuseRecipient: () => undefined,
    hang: () => false,
    waitFor: (count, timeoutMs = WAIT_MS) => until(() => sink.received.length >= count, () => `got ${sink.received.length} of ${count} messages`, timeoutMs),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    size: 10 * 1024 * 1024,
    hideDSN: false,
    onRcptTo(address, _session, callback) {
      const code = sink.refuseRecipient(address.address);
      if (!code) return callback();
      callback(Object.assign(new Error(code >= 500 ? '5.1.1 No such user here' : '4.2.1 Mailbox busy, try later'), { responseCode: code }));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', async () => {
        const attempt = ++attempts;
        if (sink.hang(attempt)) return;
        const refusal = sink.refuse(attempt);
        if (refusal) {
          const { code, text } = typeof refusal === 'number' ? { code: refusal, text: refusal >= 500 ? 'Mailbox unavailable' : 'Try again later' } : refusal;
          return callback(Object.assign(new Error(text), { responseCode: code }));
        }
        if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
        const raw = Buffer.concat(chunks).toString('utf8');
        const address = (a: SMTPServerAddress | false) => (a ? a.address : '');
        const { dsn } = session.envelope as { dsn?: { ret?: string | null; envid?: string | null } };
        const rcptDsn = session.envelope.rcptTo.map((a) => (a as { dsn?: { notify?: string[]; orcpt?: string } }).dsn);
        sink.received.push({ mail: await simpleParser(raw), raw, envelope: { from: address(session.envelope.mailFrom), to: session.envelope.rcptTo.map(address), dsn, rcptDsn } });
        callback();
      });
    },
  });
  // A client that dies mid-session (the crash test kills one) resets its connections; that is expected.
  server.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'ECONNRESET') throw error;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sink.url = `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
  return sink;
}

/** A sink for the describe block: listening before its tests, closed after them. */
export function withSink(options: { delayMs?: number } = {}): SmtpSink {
  return forTheBlock('the SMTP sink', () => startSmtpSink(options), (sink) => sink.close());
}
