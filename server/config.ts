// Configuration comes from environment variables only; README lists them. Each one is checked at
// start against the rule below: a bad value stops the process with a line naming the variable and
// what it must be, rather than surfacing later as a confusing failure (or never).
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { DEFAULT_FANOUT, type FanoutOptions } from './broadcasts/fanout.ts';
import { DEFAULT_DELIVERY, type DeliveryOptions } from './delivery/options.ts';
import { DEFAULT_WEBHOOKS, type WebhookOptions } from './webhooks/dispatch.ts';

export interface Config {
  port: number;
  host: string;
  /** Where the SQLite file lives when DATABASE_URL is unset. */
  dataDir: string;
  /** A postgres:// URL; when set, PostgreSQL is the store. */
  databaseUrl: string | undefined;
  /** A key to seed on start, for scripts and tests. */
  apiKey: string | undefined;
  logLevel: string;
  /** Largest accepted request body, in body-parser's notation. */
  bodyLimit: string;
  /** Requests per second allowed per API key (Resend's default is 10); 0 turns rate limiting off. */
  rateLimitPerSecond: number;
  /** Failed authentications (no key, a wrong one) allowed per client address a minute, then 429; 0 turns this off. */
  authFailuresPerMinute: number;
  /** An smtp:// or smtps:// relay; unset (or SMTP_URL=capture:), messages are captured in the store. */
  smtpUrl: string | undefined;
  /** SMTP_URL=capture: asks for capture: in production, nothing less does (see refuseUnsentMail). */
  captureAsked: boolean;
  /**
   * Whether the relay at SMTP_URL is the recipients' own mail server, so that its acceptance is
   * delivery; otherwise acceptance is `sent`, and `delivered` waits for a delivery notification.
   */
  smtpFinal: boolean;
  /** NODE_ENV=production: capturing messages instead of sending them is then refused unless asked for. */
  production: boolean;
  /** Whether `npm start` runs a delivery worker (in a thread) beside the HTTP server. */
  deliveryWorker: boolean;
  /** How many: each builds and sends messages on a core of its own, and costs about 30 MB. */
  deliveryThreads: number;
  delivery: DeliveryOptions;
  /** The broadcast fan-out, which runs wherever the delivery worker does. */
  fanout: FanoutOptions;
  /** How long a client may take to send its request headers, and its whole request. */
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
  /** How long a streamed response waits for a client that reads nothing before cutting it off. */
  streamStallTimeoutMs: number;
  /** On SIGTERM, how long requests in flight may take before their connections are closed. */
  shutdownGraceMs: number;
  /** PostgreSQL: how long to wait for a pooled connection, and for one statement. */
  databaseConnectTimeoutMs: number;
  databaseStatementTimeoutMs: number;
  /** Origins whose pages may call the API (CORS), or `*` for any; empty, no CORS headers at all. */
  corsOrigins: string[];
  /** Whether GET /metrics serves Prometheus metrics. */
  metrics: boolean;
  /**
   * The URL people reach this server at, without a trailing slash: unsubscribe links start with it.
   * Unset, the server's own URL (http://HOST:PORT) is used.
   */
  publicUrl: string | undefined;
  /** The secret unsubscribe links are signed with; unset, one is generated and kept in the store. */
  unsubscribeSecret: string | undefined;
  /** The SMTP listener for bounces (DSNs) and complaints (ARF), where the delivery worker runs; unset, none. */
  inbound: { port: number; host: string } | undefined;
  /** The largest message the inbound listener takes, in bytes. */
  inboundMaxBytes: number;
  /** Webhook deliveries, which run wherever the delivery worker does, and the endpoints allowed. */
  webhooks: WebhookOptions;
  /** Attachments given by `path`: where they may be fetched from, and for how long (server/emails/attachmentPath.ts). */
  attachmentPaths: { allowPrivate: boolean; timeoutMs: number };
  /** Sending domains: their DNS checks, and whether mail from a domain never registered is refused. */
  domains: DomainOptions;
}

export interface DomainOptions {
  /** `host:port` resolvers to ask instead of the system's; empty, the system's. */
  dnsServers: string[];
  /** Refuse a `from` on a domain that is not registered (NODE_ENV=production or REQUIRE_VERIFIED_DOMAIN=true). */
  requireRegistered: boolean;
  /** How often a verified (or failed) domain's records are looked up again. */
  checkIntervalMs: number;
  /** Where bounces come back to, when they do: the return path's MX points at `mxHost`. */
  bounceDomain: string | undefined;
  mxHost: string | undefined;
}

/** A configuration that cannot be used; its message has one line per bad variable. */
export class ConfigError extends Error {}

/** Values that may hold a password: a bad one is named, never echoed. */
const SECRET = new Set(['DATABASE_URL', 'SMTP_URL', 'MAILROOM_API_KEY', 'UNSUBSCRIBE_SECRET']);
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** The SMTP_URL that asks for messages to be captured in the store rather than sent. */
const CAPTURE = 'capture:';

// Each variable's rule is a small reader rather than a schema library's, which would cost memory in
// every thread that reads the configuration (the server's and each delivery thread's).

/** What a value must be, when it is not. */
class Refusal {
  constructor(readonly message: string) {}
}

/** One variable: how a value given is read, and what stands when none is. */
interface Variable<T, Unset> {
  read: (value: string) => T | Refusal;
  unset: Unset;
}

const variable = <T>(read: (value: string) => T | Refusal, unset: T): Variable<T, T> => ({ read, unset });
const optional = <T>(read: (value: string) => T | Refusal): Variable<T, undefined> => ({ read, unset: undefined });

const text = (value: string) => value;
const DAY_MS = 24 * 3600_000;

function whole(min = 0, max = Number.MAX_SAFE_INTEGER) {
  const rule = max === Number.MAX_SAFE_INTEGER ? `a whole number of at least ${min}` : `a whole number from ${min} to ${max}`;
  return (value: string) => (/^\d+$/.test(value) && Number(value) >= min && Number(value) <= max ? Number(value) : new Refusal(`must be ${rule}`));
}

const oneOf =
  <const Choice extends string>(choices: readonly Choice[], message = `must be one of ${choices.join(', ')}`) =>
  (value: string) =>
    choices.includes(value as Choice) ? (value as Choice) : new Refusal(message);

function url(protocols: string[], { host = false, or = '' } = {}) {
  const rule = `must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}${host ? ', naming a host' : ''}${or ? `, or ${or}` : ''}`;
  // `smtp://` alone parses, and nodemailer would then send to itself (127.0.0.1:587).
  const fits = (parsed: URL) => protocols.includes(parsed.protocol) && (!host || parsed.hostname !== '');
  return (value: string) => (URL.canParse(value) && fits(new URL(value)) ? value : new Refusal(rule));
}

/**
 * The longest wait Node's timers keep: a longer one is taken as 1 ms (with a warning), so a grace of
 * 30 days would end at once. Every setting in milliseconds is held to it.
 */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;
const milliseconds = (min = 0, max = LONGEST_TIMER_MS) => whole(min, max);

const matching = (pattern: RegExp, message: string) => (value: string) => (pattern.test(value) ? value : new Refusal(message));

/** A size as BODY_LIMIT gives it: `4mb`, `512kb`, `100000`. */
const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i;
const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** Such a size in bytes, as express.json reads it. */
export function bytesOf(size: string): number {
  const [, amount, unit] = SIZE.exec(size) ?? [];
  if (amount === undefined) throw new Error(`not a size: ${size}`);
  return Math.floor(Number(amount) * UNITS[(unit ?? 'b').toLowerCase()]!);
}

/** Reads a value, then makes it what the configuration holds, unless it was refused. */
const then =
  <T, U>(read: (value: string) => T | Refusal, make: (value: T) => U) =>
  (value: string) => {
    const got = read(value);
    return got instanceof Refusal ? got : make(got);
  };

function publicUrl(value: string): string | Refusal {
  // Links in emails are followed from anywhere: an absolute http(s) URL, with nothing after its path.
  const parsed = URL.canParse(value) ? new URL(value) : undefined;
  const fits = parsed && ['http:', 'https:'].includes(parsed.protocol) && !value.includes('?') && !value.includes('#') && !parsed.username && !parsed.password;
  return fits ? value.replace(/\/+$/, '') : new Refusal('must be an absolute http:// or https:// URL without a query, a fragment or credentials');
}

const DOMAIN_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

/** `192.0.2.1`, `192.0.2.1:5353`, `[2001:db8::1]` or `[2001:db8::1]:53`, as node's resolver takes them. */
function isResolverAddress(server: string): boolean {
  const parsed = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(server);
  if (!parsed) return false;
  const [, v6, v4, port] = parsed;
  const family = v6 !== undefined ? isIP(v6) === 6 : isIP(v4!) === 4;
  return family && (port === undefined || (Number(port) >= 1 && Number(port) <= 65535));
}

const VARIABLES = {
  PORT: variable(whole(0, 65535), 3000),
  HOST: variable(text, '127.0.0.1'),
  DATA_DIR: variable(text, './data'),
  DATABASE_URL: optional(url(['postgres:', 'postgresql:'])),
  // A full access key: a short one can be guessed, and one with spaces or past ASCII cannot be sent back in a header.
  MAILROOM_API_KEY: optional(matching(/^[\x21-\x7E]{16,}$/, 'must be at least 16 characters, printable ASCII without spaces')),
  LOG_LEVEL: variable(oneOf(LOG_LEVELS), 'info'),
  // body-parser's notation (the `bytes` package): a number of bytes, or one with b, kb, mb or gb.
  // Under a kilobyte, most sends could not be made at all (0 refused every body).
  BODY_LIMIT: variable(
    then(matching(SIZE, 'must be a size such as 4mb, 512kb or 100000'), (size) => (bytesOf(size) >= 1024 ? size : new Refusal('must be at least 1kb'))),
    '4mb',
  ),
  RATE_LIMIT_PER_SECOND: variable(whole(), 10),
  // A person who mistypes a key, or a script started with a wrong one, stays well under it; a client
  // retrying a wrong key in a loop passes it at once.
  AUTH_FAILURES_PER_MINUTE: variable(whole(), 30),
  // `capture:` keeps messages in the store, as unset does: production needs it said (refuseUnsentMail).
  SMTP_URL: optional((value) =>
    value.toLowerCase() === CAPTURE ? CAPTURE : url(['smtp:', 'smtps:'], { host: true, or: CAPTURE })(value),
  ),
  SMTP_FINAL: variable(oneOf(['true', 'false'], 'must be true or false'), 'false'),
  NODE_ENV: optional(text),
  DELIVERY_WORKER: variable(oneOf(['on', 'off'], 'must be on or off'), 'on'),
  DELIVERY_THREADS: variable(whole(1, 16), 1),
  DELIVERY_MAX_ATTEMPTS: variable(whole(1), DEFAULT_DELIVERY.maxAttempts),
  DELIVERY_RETRY_BASE_MS: variable(milliseconds(), DEFAULT_DELIVERY.retryBaseMs),
  // Leases and timeouts have floors: `60` meant as seconds would time every send out (a send waits half the lease).
  DELIVERY_LEASE_MS: variable(milliseconds(1000), DEFAULT_DELIVERY.leaseMs),
  FANOUT_LEASE_MS: variable(milliseconds(1000), DEFAULT_FANOUT.leaseMs),
  FANOUT_CHUNK_SIZE: variable(whole(1, 10_000), DEFAULT_FANOUT.chunkSize),
  HEADERS_TIMEOUT_MS: variable(milliseconds(), 10_000),
  REQUEST_TIMEOUT_MS: variable(milliseconds(), 30_000),
  // Node waits a second past it before it closes the socket: that second must fit its timer too.
  KEEP_ALIVE_TIMEOUT_MS: variable(milliseconds(0, LONGEST_TIMER_MS - 1_000), 5_000),
  STREAM_STALL_TIMEOUT_MS: variable(milliseconds(), 30_000),
  SHUTDOWN_GRACE_MS: variable(milliseconds(), 10_000),
  // 0 is pg's "wait for ever": a database that takes the connection and never answers would hang
  // start-up, and every request, for good.
  DATABASE_CONNECT_TIMEOUT_MS: variable(milliseconds(100), 5_000),
  // pg's own timer for a statement waits 5 s longer than the server's (server/store/database.ts).
  DATABASE_STATEMENT_TIMEOUT_MS: variable(milliseconds(0, LONGEST_TIMER_MS - 5_000), 30_000),
  // A comma-separated list of origins, or `*`; each origin is checked where CORS is set up (server/cors.ts).
  CORS_ORIGINS: variable(text, ''),
  METRICS: variable(oneOf(['on', 'off'], 'must be on or off'), 'on'),
  PUBLIC_URL: optional(publicUrl),
  UNSUBSCRIBE_SECRET: optional((value) => (value.length >= 32 ? value : new Refusal('must be at least 32 characters'))),
  // The domain of the VERP return path: its MX must lead to the inbound listener (INBOUND_SMTP_PORT).
  BOUNCE_DOMAIN: optional(then(matching(DOMAIN_NAME, 'must be a domain name such as bounces.example.com'), (domain) => domain.toLowerCase())),
  // The host a domain's return-path MX record names: the inbound listener's public name.
  INBOUND_MX_HOST: optional(then(matching(DOMAIN_NAME, 'must be a host name such as mx.example.com'), (host) => host.toLowerCase())),
  // Resolvers for domain checks, `host:port` each (tests run one on loopback); unset, the system's.
  DNS_SERVERS: optional((list) => {
    const servers = list.split(',');
    return servers.every(isResolverAddress) ? servers : new Refusal('must be a comma-separated list of IP addresses, each with an optional :port (an IPv6 address in brackets)');
  }),
  REQUIRE_VERIFIED_DOMAIN: optional(oneOf(['true', 'false'], 'must be true or false')),
  DOMAIN_CHECK_INTERVAL_MS: variable(milliseconds(1000), 6 * 3600_000),
  INBOUND_SMTP_PORT: optional(whole(0, 65535)),
  INBOUND_SMTP_HOST: variable(text, '127.0.0.1'),
  // A report needs the original's headers only (DSNs are asked for with RET=HDRS); under 10 KB a long
  // header block would not fit.
  INBOUND_MAX_BYTES: variable(whole(10_240), 256 * 1024),
  WEBHOOK_ALLOW_PRIVATE: variable(oneOf(['true', 'false'], 'must be true or false'), 'false'),
  ATTACHMENT_PATH_ALLOW_PRIVATE: variable(oneOf(['true', 'false'], 'must be true or false'), 'false'),
  ATTACHMENT_PATH_TIMEOUT_MS: variable(milliseconds(100, 600_000), 10_000),
  WEBHOOK_TIMEOUT_MS: variable(milliseconds(100, 600_000), DEFAULT_WEBHOOKS.timeoutMs),
  // Unset: a minute, or the timeout and half a minute more when that is longer.
  WEBHOOK_LEASE_MS: optional(milliseconds(1000)),
  WEBHOOK_CONCURRENCY: variable(whole(1, 1000), DEFAULT_WEBHOOKS.concurrency),
  WEBHOOK_DISABLE_AFTER_FAILED: variable(whole(), DEFAULT_WEBHOOKS.disableAfterFailed),
  WEBHOOK_KEEP_DAYS: variable(whole(1), DEFAULT_WEBHOOKS.keepEndedMs / DAY_MS),
  // The waits before the second, third... attempt: Resend's schedule unless set (tests shorten it).
  WEBHOOK_RETRY_SCHEDULE_MS: variable(
    then(matching(/^\d{1,10}(,\d{1,10}){0,19}$/, 'must be 1 to 20 whole numbers of milliseconds, separated by commas'), (list) => {
      const waits = list.split(',').map(Number);
      return waits.every((wait) => wait <= LONGEST_TIMER_MS) ? waits : new Refusal(`must be 1 to 20 whole numbers of milliseconds up to ${LONGEST_TIMER_MS}, separated by commas`);
    }),
    DEFAULT_WEBHOOKS.retryScheduleMs,
  ),
};

type Environment = { [Name in keyof typeof VARIABLES]: (typeof VARIABLES)[Name] extends Variable<infer T, infer Unset> ? T | Unset : never };

/** Reads every variable; the lines name each one that is wrong and what it must be. */
function readEnvironment(given: Record<string, string | undefined>): { environment: Environment; lines: string[] } {
  const read: Record<string, unknown> = {};
  const lines: string[] = [];
  const refuse = (name: string, message: string) => lines.push(SECRET.has(name) ? `${name} ${message}` : `${name} ${message}, got ${JSON.stringify(given[name])}`);
  for (const [name, { read: readValue, unset }] of Object.entries(VARIABLES) as [string, Variable<unknown, unknown>][]) {
    const value = given[name];
    const got = value === undefined ? unset : readValue(value);
    if (got instanceof Refusal) refuse(name, got.message);
    else read[name] = got;
  }
  const environment = read as Environment;
  // A claim must outlast the attempt it covers, or another worker would post the same delivery meanwhile.
  if (lines.length === 0 && environment.WEBHOOK_LEASE_MS !== undefined && environment.WEBHOOK_LEASE_MS <= environment.WEBHOOK_TIMEOUT_MS) {
    refuse('WEBHOOK_LEASE_MS', 'must be longer than WEBHOOK_TIMEOUT_MS');
  }
  return { environment, lines };
}

/** Reads the configuration from `env`; throws a ConfigError naming every variable that is wrong. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable (`PORT=`) means unset, as it always has: the default applies.
  const given = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const { environment: e, lines } = readEnvironment(given);
  // One problem on the line that says it (a supervisor may show one line); several, one a line.
  if (lines.length === 1) throw new ConfigError(`invalid configuration: ${lines[0]}`);
  if (lines.length > 1) throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    apiKey: e.MAILROOM_API_KEY,
    logLevel: e.LOG_LEVEL,
    bodyLimit: e.BODY_LIMIT,
    rateLimitPerSecond: e.RATE_LIMIT_PER_SECOND,
    authFailuresPerMinute: e.AUTH_FAILURES_PER_MINUTE,
    smtpUrl: e.SMTP_URL === CAPTURE ? undefined : e.SMTP_URL,
    captureAsked: e.SMTP_URL === CAPTURE,
    smtpFinal: e.SMTP_FINAL === 'true',
    production: e.NODE_ENV === 'production',
    deliveryWorker: e.DELIVERY_WORKER === 'on',
    deliveryThreads: e.DELIVERY_THREADS,
    delivery: {
      ...DEFAULT_DELIVERY,
      maxAttempts: e.DELIVERY_MAX_ATTEMPTS,
      retryBaseMs: e.DELIVERY_RETRY_BASE_MS,
      leaseMs: e.DELIVERY_LEASE_MS,
      bounceDomain: e.BOUNCE_DOMAIN,
    },
    fanout: { ...DEFAULT_FANOUT, leaseMs: e.FANOUT_LEASE_MS, chunkSize: e.FANOUT_CHUNK_SIZE },
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
    streamStallTimeoutMs: e.STREAM_STALL_TIMEOUT_MS,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    databaseConnectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT_MS,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    corsOrigins: e.CORS_ORIGINS.split(',').map((origin) => origin.trim()).filter(Boolean),
    metrics: e.METRICS === 'on',
    publicUrl: e.PUBLIC_URL,
    unsubscribeSecret: e.UNSUBSCRIBE_SECRET,
    inbound: e.INBOUND_SMTP_PORT === undefined ? undefined : { port: e.INBOUND_SMTP_PORT, host: e.INBOUND_SMTP_HOST },
    inboundMaxBytes: e.INBOUND_MAX_BYTES,
    webhooks: {
      ...DEFAULT_WEBHOOKS,
      allowPrivate: e.WEBHOOK_ALLOW_PRIVATE === 'true',
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      leaseMs: e.WEBHOOK_LEASE_MS ?? Math.max(DEFAULT_WEBHOOKS.leaseMs, e.WEBHOOK_TIMEOUT_MS + 30_000),
      concurrency: e.WEBHOOK_CONCURRENCY,
      disableAfterFailed: e.WEBHOOK_DISABLE_AFTER_FAILED,
      keepEndedMs: e.WEBHOOK_KEEP_DAYS * DAY_MS,
      retryScheduleMs: [...e.WEBHOOK_RETRY_SCHEDULE_MS],
    },
    attachmentPaths: { allowPrivate: e.ATTACHMENT_PATH_ALLOW_PRIVATE === 'true', timeoutMs: e.ATTACHMENT_PATH_TIMEOUT_MS },
    domains: {
      dnsServers: e.DNS_SERVERS ?? [],
      // Unset, production refuses and development (the README's two commands) accepts, with a warning.
      requireRegistered: e.REQUIRE_VERIFIED_DOMAIN === undefined ? e.NODE_ENV === 'production' : e.REQUIRE_VERIFIED_DOMAIN === 'true',
      checkIntervalMs: e.DOMAIN_CHECK_INTERVAL_MS,
      bounceDomain: e.BOUNCE_DOMAIN,
      mxHost: e.INBOUND_MX_HOST ?? e.BOUNCE_DOMAIN,
    },
  };
}

/**
 * For a process that delivers mail (`npm start` with its delivery thread, `npm run worker`): in
 * production, capturing messages (kept in the store, never sent, reported delivered) must be asked for
 * with SMTP_URL=capture:, or the process does not start. A server without the delivery thread sends
 * nothing itself, and neither does the keys command: they need no SMTP_URL.
 */
export function refuseUnsentMail(config: Config): void {
  if (config.production && !config.smtpUrl && !config.captureAsked) {
    throw new ConfigError(
      'invalid configuration: SMTP_URL is not set, and with NODE_ENV=production mail would be kept in the store, never sent, and reported delivered: set SMTP_URL to your relay (smtp:// or smtps://), or to capture: to capture mail on purpose',
    );
  }
}

/** In production, unsubscribe links over plain http are worth a line: mail providers expect https (RFC 8058). */
export function warnOfPlainHttp(config: Config, publicUrl: string, logger: Logger): void {
  if (config.production && !publicUrl.startsWith('https://')) {
    logger.warn({ publicUrl }, 'PUBLIC_URL is not https: unsubscribe links in broadcast emails should be https; set PUBLIC_URL');
  }
}
