// A real SMTP server on 127.0.0.1 (smtp-server) that parses what it receives with mailparser, and can
// be told to refuse messages, to test a relay that says "try later" or "never".
import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';

export interface Received {
  mail: ParsedMail;
  raw: string;
  envelope: { from: string; to: string[] };
}

export interface SmtpSink {
  url: string;
  received: Received[];
  /** Decides each message's fate: undefined accepts it, a number refuses it with that reply code. */
  refuse: (attempt: number) => number | undefined;
  /** Waits until `count` messages have arrived. */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSmtpSink(options: { delayMs?: number } = {}): Promise<SmtpSink> {
  let attempts = 0;
  const sink: SmtpSink = {
    url: '',
    received: [],
    refuse: () => undefined,
    waitFor: async (count, timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      while (sink.received.length < count) {
        if (Date.now() > deadline) throw new Error(`got ${sink.received.length} of ${count} messages`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    size: 10 * 1024 * 1024,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', async () => {
        const code = sink.refuse(++attempts);
        if (code) {
          const error = Object.assign(new Error(code >= 500 ? 'Mailbox unavailable' : 'Try again later'), { responseCode: code });
          return callback(error);
        }
        if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
        const raw = Buffer.concat(chunks).toString('utf8');
        const address = (a: SMTPServerAddress | false) => (a ? a.address : '');
        sink.received.push({ mail: await simpleParser(raw), raw, envelope: { from: address(session.envelope.mailFrom), to: session.envelope.rcptTo.map(address) } });
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
