// The inbound SMTP listener: where bounces (DSNs, to the VERP return path) and complaint reports (ARF,
// to whatever address the operator has them sent to) arrive. Every message is accepted and read; what
// it reports is recorded on its email (store/reports.ts). Mail that reports nothing known, or names no
// email of ours, is accepted, logged and dropped: refusing it would only make the sender try again.
// Only a database that cannot be reached, or a report about an email still being sent, is a 4xx, so
// that the report comes again later.
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { SMTPServerAddress } from 'smtp-server';
import { ConfigError } from '../config.ts';
import { bounceSubType, bounceType, statusIn, type Bounce } from '../delivery/bounce.ts';
import { bounced, complained, delayed, delivered, onOwnRecipients, type Decision } from '../delivery/report.ts';
import type { Store } from '../store/index.ts';
import { TOO_EARLY, type ReportOutcome } from '../store/reports.ts';
import { readReport, type DsnRecipient, type Report } from './report.ts';

export interface InboundOptions {
  port: number;
  host: string;
  /** Largest message accepted, in bytes; DSNs and ARF reports return headers, or one message at most. */
  maxBytes?: number;
  /** Connections served at once. */
  maxClients?: number;
  /** Connections served at once from one address. */
  maxPerAddress?: number;
}

export interface InboundListener {
  port: number;
  close(): Promise<void>;
}

export async function startInbound(store: Store, logger: Logger, options: InboundOptions): Promise<InboundListener> {
  const maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
  const maxPerAddress = options.maxPerAddress ?? 10;
  // Loaded here, not at the top: a delivery thread without a listener (the default) is spared
  // smtp-server and mailparser, about 10 MB of memory.
  const { SMTPServer } = await import('smtp-server');
  const server = new SMTPServer({
    name: 'mailroom-inbound',
    banner: 'Mailroom accepts bounces and complaint reports here',
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    size: maxBytes,
    maxClients: options.maxClients ?? 100,
    // A client that opens connections and says nothing holds each for the idle timeout (a minute):
    // one address may hold a tenth of them, so that it cannot keep the relays' reports out alone.
    onConnect(session, callback) {
      const fromThere = [...server.connections].filter((connection) => connection.remoteAddress === session.remoteAddress).length;
      if (fromThere <= maxPerAddress) return callback();
      callback(Object.assign(new Error(`Too many connections from ${session.remoteAddress}, try again in a moment`), { responseCode: 421 }));
    },
    // The client's name from a PTR lookup is used for nothing here: no DNS query a connection for it.
    disableReverseLookup: true,
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      let bytes = 0;
      // Past the limit the rest is read and thrown away: the message is refused whole at its end.
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes <= maxBytes) chunks.push(chunk);
      });
      stream.on('end', () => {
        if ((stream as unknown as { sizeExceeded?: boolean }).sizeExceeded) {
          return callback(Object.assign(new Error(`Message exceeds the limit of ${maxBytes} bytes`), { responseCode: 552 }));
        }
        const recipients = session.envelope.rcptTo.map((a: SMTPServerAddress) => a.address);
        receive(store, logger, Buffer.concat(chunks), recipients).then(
          (outcome) => callback(outcome === TOO_EARLY ? Object.assign(new Error('The email it reports on is still being sent: try again later'), { responseCode: 451 }) : undefined),
          (err) => {
            logger.warn({ err }, 'an inbound report could not be recorded now; the sender will try again');
            callback(Object.assign(new Error('Try again later'), { responseCode: 451 }));
          },
        );
      });
    },
  });
  server.on('error', (err) => logger.warn({ err }, 'inbound SMTP connection error'));
  await new Promise<void>((resolve, reject) => {
    // A port in use or an address that is not this machine's is the configuration's fault: said so,
    // the process stops at start rather than restarting a delivery thread that can never listen.
    server.server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new ConfigError(`the inbound listener cannot listen on INBOUND_SMTP_HOST ${options.host}, INBOUND_SMTP_PORT ${options.port}: ${error.code ?? error.message}`)),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;
  logger.info({ port, host: options.host }, 'inbound SMTP listener started');
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** Reads one message and records what it reports; rejects when that could not be recorded. */
async function receive(store: Store, logger: Logger, raw: Buffer, recipients: string[]): Promise<ReportOutcome | 'nothing to record' | undefined> {
  let report: Report;
  try {
    report = await readReport(raw, recipients);
  } catch (err) {
    logger.info({ err, bytes: raw.length }, 'inbound mail ignored: it could not be parsed');
    return;
  }
  if (report.kind === 'other') return void logger.info({ why: report.why }, 'inbound mail ignored: not a report');
  if (!report.emailId) return void logger.info({ kind: report.kind }, 'inbound report ignored: it names no email');
  // A report that could not be recorded is refused for now (451), whatever the reason: the sender
  // tries again, and a report it was told was taken is never dropped.
  const outcome = await record(store, report, report.emailId);
  logger.info({ kind: report.kind, emailId: report.emailId, outcome }, 'inbound report');
  return outcome;
}

function record(store: Store, report: Exclude<Report, { kind: 'other' }>, emailId: string): Promise<ReportOutcome | 'nothing to record'> {
  const now = new Date();
  if (report.kind === 'complaint') return store.reports.apply(emailId, complained(report.feedbackType, report.addresses), now);
  if (report.recipients.length === 0) return Promise.resolve('nothing to record');
  return store.reports.apply(emailId, onOwnRecipients(report.recipients, dsnDecision), now);
}

/** What a DSN's lines about the email's recipients make of it: a bounce, a delay, a delivery, or nothing. */
function dsnDecision(recipients: DsnRecipient[]): Decision | undefined {
  const failed = recipients.filter((r) => r.action === 'failed');
  if (failed.length > 0) {
    const permanent = failed.filter((r) => bounceType(statusOf(r)) === 'Permanent');
    return bounced(bounceOf(failed), permanent.flatMap((r) => r.address ?? []));
  }
  const late = recipients.find((r) => r.action === 'delayed');
  if (late) return delayed((late.diagnostic ?? `Delivery delayed (status ${statusOf(late) ?? 'unknown'})`).slice(0, 1000));
  if (recipients.some((r) => ['delivered', 'relayed', 'expanded'].includes(r.action))) return delivered();
  return undefined;
}

/** A DSN's failed recipients as one bounce: Permanent if any failed for good (5.x.x), else Transient (4.x.x), else Undetermined. */
function bounceOf(failed: DsnRecipient[]): Bounce {
  const statuses = failed.map(statusOf);
  const type = statuses.some((s) => bounceType(s) === 'Permanent') ? 'Permanent' : statuses.some((s) => bounceType(s) === 'Transient') ? 'Transient' : 'Undetermined';
  const first = failed.find((r) => bounceType(statusOf(r)) === type) ?? failed[0]!;
  const diagnostics = failed.map((r) => (r.diagnostic ?? `status ${statusOf(r) ?? 'unknown'}`).slice(0, 1000));
  return {
    type,
    subType: type === 'Undetermined' ? 'Undetermined' : bounceSubType(statusOf(first)),
    message: `The message could not be delivered to ${first.address ?? 'a recipient'}: ${diagnostics[failed.indexOf(first)]}`.slice(0, 1000),
    diagnosticCode: diagnostics.slice(0, 100),
  };
}

/** A recipient's status: its Status field, else a code in its diagnostic. */
const statusOf = (r: DsnRecipient) => (r.status && statusIn(r.status)) ?? (r.diagnostic ? statusIn(r.diagnostic) : undefined);
