// Where messages go: an SMTP relay (pooled connections) when SMTP_URL is set, else the embedded
// capture transport, which keeps the raw MIME in the store and counts the email as delivered.
// A relay that accepts a message has sent it on, not delivered it: the relay is not the recipient,
// unless the operator says it is (SMTP_FINAL, for a relay that is the recipients' own server).
import { createTransport } from 'nodemailer';
import type { OutgoingMessage } from './message.ts';
import { DEFAULT_DELIVERY } from './options.ts';
import { buildMessage } from './mime.ts';
import { DkimSigner } from './dkimSigner.ts';

/** A recipient the relay refused, for good (5xx) or for now (4xx), and the reply it refused with. */
export interface Refusal {
  address: string;
  reply: string;
  /** Refused with the whole message, at the end of DATA: the reply is about the message, not this address. */
  withMessage?: boolean;
}

export interface Transport {
  /** Whether a message it accepts has reached its recipients: then `delivered` comes with `sent`. */
  readonly final: boolean;
  /**
   * Sends one message; resolves with its raw MIME when the transport keeps it, and the recipients the
   * relay refused for good (`refused`) or for now (`deferred`) while it took the message for the others.
   */
  send(message: OutgoingMessage): Promise<{ raw?: string; refused?: Refusal[]; deferred?: Refusal[] }>;
  close(): void;
}

/** Connections held open to the relay. */
export const RELAY_CONNECTIONS = 5;
/** The longest wait for the relay, at any step of a send, unless told: half the default lease. */
const RELAY_TIMEOUT_MS = DEFAULT_DELIVERY.leaseMs / 2;

/**
 * `timeoutMs` bounds each wait for the relay: to connect, for its greeting, and for each reply (the
 * one after the message included). Keep it under the delivery lease: a send still waiting when the
 * lease runs out is sent again by another worker. nodemailer's own default is 10 minutes, during which
 * one hung connection held up every email claimed with it.
 */
export function smtpTransport(
  smtpUrl: string,
  { final = false, maxConnections = RELAY_CONNECTIONS, timeoutMs = RELAY_TIMEOUT_MS }: { final?: boolean; maxConnections?: number; timeoutMs?: number } = {},
): Transport {
  const url = new URL(smtpUrl);
  if (!url.searchParams.has('pool')) url.searchParams.set('pool', 'true');
  if (!url.searchParams.has('maxConnections')) url.searchParams.set('maxConnections', String(maxConnections));
  // The URL's own settings, if any, win over these.
  const transporter = createTransport({ url: url.toString(), connectionTimeout: timeoutMs, greetingTimeout: timeoutMs, socketTimeout: timeoutMs });
  const signed = signing();
  return {
    final,
    send: async (message) => {
      // Built whole into one buffer, which the connection writes at once (server/delivery/mime.ts),
      // and signed with its domain's key (./dkimSigner.ts), once for every recipient's copy. The
      // Message-ID is given again so that nodemailer does not make one up for the raw message.
      const { envelope, dsn, messageId, returnPaths } = message;
      const raw = await signed(message);
      const sendMail = (envelope: OutgoingMessage['envelope'], dsn: OutgoingMessage['dsn']) => transporter.sendMail({ envelope, dsn, messageId, raw });
      if (returnPaths) {
        // Each transaction has one recipient, whom ORCPT names.
        return toEach(envelope.to, (recipient) => sendMail({ from: returnPaths(recipient), to: [recipient] }, dsn && { ...dsn, recipient }));
      }
      const { rejectedErrors } = (await sendMail(envelope, dsn)) as { rejectedErrors?: unknown[] };
      return { refused: refusals(rejectedErrors, isPermanent), deferred: refusals(rejectedErrors, isTransient) };
    },
    close: () => {
      transporter.close();
      void signed.close();
    },
  };
}

export function captureTransport(): Transport {
  // A signed message is kept as a relay would get it. Recipients' copies differ only in their
  // envelopes (their return paths), which are not kept: one message stands for them all.
  const signed = signing();
  return {
    final: true,
    send: async (message) => ({ raw: (await signed(message)).toString('latin1') }),
    close: () => void signed.close(),
  };
}

/** A message's bytes, signed when it carries its domain's key. */
function signing(): ((message: OutgoingMessage) => Promise<Buffer>) & { close(): Promise<void> } {
  const signer = new DkimSigner();
  const signed = async (message: OutgoingMessage) => (message.dkim ? signer.sign(buildMessage(message), message.dkim) : buildMessage(message));
  return Object.assign(signed, { close: () => signer.close() });
}

/**
 * Sends each recipient its copy in a transaction of its own, all at once (the pool queues them), and
 * gathers what became of them as one send: a recipient refused with a 5xx at RCPT TO or at the end
 * of DATA is refused; one put off with a 4xx, or whose transaction got no reply, is deferred, and the
 * next attempt goes to it alone. When every transaction failed before reaching its recipient (the
 * relay unreachable, or refusing the sender), that failure is the email's, thrown as one send's would
 * be: a refusal for good first, since no later attempt would fare better.
 */
async function toEach(recipients: string[], send: (recipient: string) => Promise<unknown>): Promise<{ refused: Refusal[]; deferred: Refusal[] }> {
  const outcomes = await Promise.allSettled(recipients.map(send));
  const refused: Refusal[] = [];
  const deferred: Refusal[] = [];
  const failures: unknown[] = [];
  for (const [n, outcome] of outcomes.entries()) {
    const recipient = recipients[n]!;
    if (outcome.status === 'fulfilled') {
      const { rejectedErrors } = outcome.value as { rejectedErrors?: unknown[] };
      refused.push(...refusals(rejectedErrors, isPermanent));
      deferred.push(...refusals(rejectedErrors, isTransient));
      continue;
    }
    const error: unknown = outcome.reason;
    const refusedHere = recipientRefusal(error, [recipient]);
    const deferredHere = recipientDeferral(error);
    if (refusedHere) refused.push(...refusedHere);
    else if (deferredHere.length > 0) deferred.push(...deferredHere);
    else {
      failures.push(error);
      deferred.push({ address: recipient, reply: replyOf(error) });
    }
  }
  if (recipients.length > 0 && failures.length === recipients.length) throw failures.find(isPermanent) ?? failures[0];
  return { refused, deferred };
}

/** What the relay answered, or why there was no answer. */
const replyOf = (error: unknown) => {
  const { response, message } = error as { response?: string; message?: string };
  return response ?? String(message ?? error);
};

/** A 5xx reply is the relay's final word; anything else (4xx, a dropped connection) may pass on retry. */
export function isPermanent(error: unknown): boolean {
  const code = (error as { responseCode?: number }).responseCode;
  return typeof code === 'number' && code >= 500 && code < 600;
}

/**
 * The recipients a 5xx refused: at RCPT TO, the ones refused (whatever the others got: the error's
 * own code is the last recipient's); at the end of DATA, all of them. A 5xx to anything else
 * (MAIL FROM, AUTH) refuses the sender, not the recipients: undefined.
 */
export function recipientRefusal(error: unknown, recipients: string[]): Refusal[] | undefined {
  const { command, response, rejectedErrors } = error as { command?: string; response?: string; rejectedErrors?: unknown[] };
  if (command === 'RCPT TO') {
    const refused = refusals(rejectedErrors, isPermanent);
    return refused.length > 0 ? refused : undefined;
  }
  if (command === 'DATA' && isPermanent(error)) return recipients.map((address) => ({ address, reply: response ?? String((error as Error).message), withMessage: true }));
  return undefined;
}

/** The recipients a 4xx refused at RCPT TO when the relay took none: the ones to try again. */
export function recipientDeferral(error: unknown): Refusal[] {
  const { command, rejectedErrors } = error as { command?: string; rejectedErrors?: unknown[] };
  return command === 'RCPT TO' ? refusals(rejectedErrors, isTransient) : [];
}

const isTransient = (error: unknown) => {
  const code = (error as { responseCode?: number }).responseCode;
  return typeof code === 'number' && code >= 400 && code < 500;
};

function refusals(errors: unknown[] | undefined, matches: (error: unknown) => boolean): Refusal[] {
  return (errors ?? []).flatMap((error) => {
    const { recipient, response } = error as { recipient?: string; response?: string };
    return matches(error) && recipient ? [{ address: recipient, reply: response ?? '' }] : [];
  });
}
