// The inbound SMTP listener: where bounces (DSNs) and complaint reports (ARF) arrive, mailed to the
// return path of the recipient's copy they are about (server/delivery/returnPath.ts). Every message
// is accepted and read; what it reports is recorded on its email (store/reports.ts), for that
// recipient alone. Mail that reports nothing, or that did not reach a return path signed for one of
// its email's recipients, is accepted, logged and dropped: refusing it would only make the sender try
// again. Only a database that cannot be reached, or a report about an email still being sent, is a
// 4xx, so that the report comes again later.
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { SMTPServerAddress, SMTPServerSession } from 'smtp-server';
import { ConfigError } from '../config.ts';
import { bounceSubType, bounceType, statusIn, type Bounce } from '../delivery/bounce.ts';
import { bounced, complained, delayed, delivered, onRecipient, recipientsOf, type Decision } from '../delivery/report.ts';
import { readReturnPath, returnPaths as keptReturnPaths, SIGNED_SINCE_SETTING, type ReturnPathAddress, type ReturnPaths } from '../delivery/returnPath.ts';
import type { EmailRecord } from '../store/emails.ts';
import type { Store } from '../store/index.ts';
import { TOO_EARLY, type ReportOutcome } from '../store/reports.ts';
import { readReport, type DsnRecipient, type Report } from './report.ts';

export interface InboundOptions {
  port: number;
  host: string;
  /** Largest message accepted, in bytes: a report needs the original's headers only (DSNs are asked for with RET=HDRS). */
  maxBytes?: number;
  /** Connections served at once. */
  maxClients?: number;
  /** Connections served at once from one address. */
  maxPerAddress?: number;
  /** How long a connection may stay silent before it is closed. */
  idleMs?: number;
  /** What return paths are signed with; unset, the secret kept in the store. */
  returnPaths?: ReturnPaths;
}

export interface InboundListener {
  port: number;
  close(): Promise<void>;
}

export const INBOUND_DEFAULTS = { maxBytes: 256 * 1024, maxClients: 100, maxPerAddress: 4, idleMs: 30_000 };

/** How reports are tied to their email's recipients. */
interface Attribution {
  paths: ReturnPaths;
  /** When return paths began to be signed: an unsigned one is heeded only for an email older than this. */
  signedSince: number;
}

/** The return paths a report reached, at most this many: a relay sends one report to one. */
const RETURN_PATHS_READ = 5;

export async function startInbound(store: Store, logger: Logger, options: InboundOptions): Promise<InboundListener> {
  const { maxBytes, maxClients, maxPerAddress, idleMs } = { ...INBOUND_DEFAULTS, ...withoutUnset(options) };
  const attribution: Attribution = {
    paths: options.returnPaths ?? (await keptReturnPaths(store, undefined)),
    // Written by the migration that began signing; kept now only on a store that never had it.
    signedSince: Date.parse(await store.settings.keep(SIGNED_SINCE_SETTING, new Date().toISOString())),
  };
  // Connections held now from each client address, counted here: smtp-server counts them in all only.
  const held = new Map<string, number>();
  const counted = new Map<string, string>();
  // Loaded here, not at the top: a delivery thread without a listener (the default) is spared the
  // memory smtp-server and mailparser take.
  const { SMTPServer } = await import('smtp-server');
  const server = new SMTPServer({
    name: 'mailroom-inbound',
    banner: 'Mailroom accepts bounces and complaint reports here',
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    size: maxBytes,
    maxClients,
    // A client that opens connections and says nothing holds each until it is idle too long: one
    // address may hold only a few, so that a handful of them cannot keep the relays' reports out.
    socketTimeout: idleMs,
    // Stopping waits this long at most for the connections still open.
    closeTimeout: Math.min(idleMs, 5_000),
    onConnect(session, callback) {
      const from = session.remoteAddress;
      const now = held.get(from) ?? 0;
      if (now >= maxPerAddress) return callback(Object.assign(new Error(`Too many connections from ${from}, try again in a moment`), { responseCode: 421 }));
      held.set(from, now + 1);
      counted.set(session.id, from);
      callback();
    },
    onClose(session: SMTPServerSession) {
      const from = counted.get(session.id);
      if (from === undefined) return; // refused, never counted
      counted.delete(session.id);
      const left = (held.get(from) ?? 1) - 1;
      if (left > 0) held.set(from, left);
      else held.delete(from);
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
        receive(store, logger, attribution, Buffer.concat(chunks), recipients).then(
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
async function receive(store: Store, logger: Logger, attribution: Attribution, raw: Buffer, recipients: string[]): Promise<ReportOutcome | undefined> {
  let report: Report;
  try {
    report = await readReport(raw);
  } catch (err) {
    logger.info({ err, bytes: raw.length }, 'inbound mail ignored: it could not be parsed');
    return;
  }
  if (report.kind === 'other') return void logger.info({ why: report.why }, 'inbound mail ignored: not a report');
  const reached = [...new Map(recipients.flatMap((address) => readReturnPath(address) ?? []).map((path) => [`${path.emailId}-${path.tag}`, path])).values()];
  if (reached.length === 0) return void logger.info({ kind: report.kind }, 'inbound report ignored: not sent to a return path');
  // A report that could not be recorded is refused for now (451), whatever the reason: the sender
  // tries again, and a report it was told was taken is never dropped.
  let outcome: ReportOutcome | undefined;
  for (const path of reached.slice(0, RETURN_PATHS_READ)) {
    const heard: { why?: string } = {};
    const now = await store.reports.apply(path.emailId, attributed(attribution, path, report, heard), new Date());
    if (heard.why) logger.info({ kind: report.kind, emailId: path.emailId, why: heard.why }, 'inbound report ignored');
    else logger.info({ kind: report.kind, emailId: path.emailId, outcome: now }, 'inbound report');
    if (outcome !== TOO_EARLY) outcome = now;
  }
  return outcome;
}

/**
 * What the report does to the email whose return path it reached: what the decisions make of it for
 * the recipient that return path was made for, provided it names nobody else. `heard.why` says why
 * it changes nothing, when that is not the email's state.
 */
function attributed({ paths, signedSince }: Attribution, path: ReturnPathAddress, report: Exclude<Report, { kind: 'other' }>, heard: { why?: string }): Decision {
  return (email) => {
    const recipient = path.tag === undefined ? unsignedRecipient(email, signedSince) : paths.recipientOf(path, recipientsOf(email));
    if (recipient === undefined) {
      heard.why = path.tag === undefined ? 'an unsigned return path, heeded only for an email to one recipient sent before return paths were signed' : 'its return path is not signed for this email';
      return undefined;
    }
    const decision =
      report.kind === 'complaint'
        ? onRecipient(recipient, [{ address: report.rcptTo }], (_, who) => complained(report.feedbackType, [who]))
        : onRecipient(recipient, report.recipients, dsnDecision);
    if (!decision) heard.why = 'it names someone other than the recipient its return path was made for, or says nothing of that recipient';
    return decision?.(email);
  };
}

/** The recipient an unsigned return path can stand for: the only one of an email sent before return paths were signed. */
function unsignedRecipient(email: EmailRecord, signedSince: number): string | undefined {
  const recipients = recipientsOf(email);
  return Date.parse(email.created_at) < signedSince && recipients.length === 1 ? recipients[0] : undefined;
}

/** Options without the ones left unset, so that defaults fill them. */
const withoutUnset = <T extends object>(options: T): Partial<T> => Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;

/** What a DSN's lines about one recipient make of it: a bounce, a delay, a delivery, or nothing. */
function dsnDecision(recipients: DsnRecipient[], recipient: string): Decision | undefined {
  const failed = recipients.filter((r) => r.action === 'failed');
  if (failed.length > 0) {
    const permanent = failed.some((r) => bounceType(statusOf(r)) === 'Permanent');
    return bounced(bounceOf(failed), permanent ? [recipient] : []);
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
