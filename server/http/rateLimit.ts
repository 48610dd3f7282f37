// Rate limiting per API key, as Resend does it: a one-second window of N requests per key; every
// response from the point the key is known says where the key stands (RateLimit-Limit, -Remaining,
// -Reset), and a request over the limit gets 429 rate_limit_exceeded with Retry-After. Apart from it,
// failed authentication is limited per client address (authFailureLimit). On PostgreSQL the counters
// live in the database (rate-limiter-flexible's RateLimiterPostgres, over a few connections of their
// own, in the table migration 0003 made), so every process sharing it shares the limits; on SQLite
// they live in this process.
//
// When the shared counters cannot be reached in time, requests are not refused or held for that
// alone: they are counted by this process instead (a log line says so, at most once a minute), so the
// limit still holds per process until the database answers again. Metrics count such requests.
import type { RequestHandler } from 'express';
import { isIPv6 } from 'node:net';
import { CompiledQuery, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { ApiError } from './errors.ts';
import type { Tables } from '../store/database.ts';
import type { Store } from '../store/index.ts';

interface Standing {
  allowed: boolean;
  res: RateLimiterRes;
}

/** How long a request waits for the shared counters before this process counts it instead. */
const SHARED_TIMEOUT_MS = 500;
const LOG_EVERY_MS = 60_000;

/**
 * `points` for each key in every window of `duration` seconds, under `keyPrefix`: counted in the
 * database on PostgreSQL, in this process otherwise, or while the database is late.
 */
function counter(options: { points: number; duration: number; keyPrefix: string }, store: Store, logger: Logger, countedLocally: () => void): (key: string) => Promise<Standing> {
  const local = new RateLimiterMemory(options);
  const shared =
    store.database.dialect === 'postgres'
      ? new RateLimiterPostgres({
          ...options,
          storeClient: counterConnections(store),
          storeType: 'pool',
          tableName: 'rate_limits',
          tableCreated: true,
          // A key over its limit is refused from memory until its window ends, as the database said:
          // a client hammering away costs the database one query per window and process.
          inMemoryBlockOnConsumed: options.points + 1,
        })
      : undefined;
  let loggedAt = -Infinity;

  /** Counts this request: the key's standing, and whether it is within the limit (the limiter rejects when not). */
  async function count(limiter: RateLimiterAbstract, key: string): Promise<Standing> {
    return limiter.consume(key).then(
      (res) => ({ allowed: true, res }),
      (result: unknown) => {
        if (result instanceof RateLimiterRes) return { allowed: false, res: result };
        throw result;
      },
    );
  }

  return async (key) => {
    if (!shared) return count(local, key);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${SHARED_TIMEOUT_MS} ms`)), SHARED_TIMEOUT_MS);
    });
    try {
      return await Promise.race([count(shared, key), late]);
    } catch (err) {
      countedLocally();
      if (performance.now() - loggedAt >= LOG_EVERY_MS) {
        loggedAt = performance.now();
        logger.warn({ err, limit: options.keyPrefix }, 'rate limit counters in the database are unavailable; counting in this process');
      }
      return count(local, key);
    } finally {
      clearTimeout(timer);
    }
  };
}

export function rateLimit(perSecond: number, store: Store, logger: Logger, countedLocally: () => void = () => {}): RequestHandler {
  const standing = counter({ points: perSecond, duration: 1, keyPrefix: 'api_key' }, store, logger, countedLocally);
  return async (_req, res, next) => {
    const key = res.locals.apiKey?.id;
    if (!key) return next();
    const { allowed, res: result } = await standing(key);
    const reset = Math.ceil(result.msBeforeNext / 1000);
    res.set({ 'RateLimit-Limit': String(perSecond), 'RateLimit-Remaining': String(result.remainingPoints), 'RateLimit-Reset': String(reset) });
    if (!allowed) {
      throw new ApiError(429, 'rate_limit_exceeded', `Too many requests. You can only make ${perSecond} requests per second.`, { 'Retry-After': String(Math.max(1, reset)) });
    }
    next();
  };
}

/**
 * Failed authentication (no API key, an unknown or a revoked one) counted per client address, in
 * windows of a minute: within `perMinute`, a failure is answered as it is (401, 403); past it, 429 with
 * Retry-After until the window ends. Only failures count, and a valid key is never refused here, so a
 * client that keeps sending a wrong key is slowed down without refusing anyone else at its address
 * (the others behind one NAT or proxy) who sends a good one. Returns the answer to a failure.
 */
export function authFailureLimit(perMinute: number, store: Store, logger: Logger): (address: string | undefined, failure: ApiError) => Promise<ApiError> {
  const standing = counter({ points: perMinute, duration: 60, keyPrefix: 'auth_failures' }, store, logger, () => {});
  return async (address, failure) => {
    const { allowed, res } = await standing(clientOf(address));
    if (allowed) return failure;
    const wait = String(Math.max(1, Math.ceil(res.msBeforeNext / 1000)));
    return new ApiError(429, 'rate_limit_exceeded', `Too many requests without a valid API key from this address: more than ${perMinute} a minute. Try again in ${wait} seconds.`, { 'Retry-After': wait });
  };
}

/**
 * Whom a budget per address belongs to: the connection's address (a forwarded-for header is anyone's
 * to write, so none is read), an IPv4 client seen over IPv6 as itself, and an IPv6 client by its /64,
 * which one subscriber usually holds whole.
 */
export function clientOf(address: string | undefined): string {
  if (!address) return 'unknown';
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)?.[1];
  if (mapped) return mapped;
  if (!isIPv6(address)) return address;
  const [head = '', tail] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups.slice(0, 4).map((group) => parseInt(group, 16).toString(16)).join(':')}::/64`;
}

/** The connections of the counters in the database, one set per store, whichever limits use them. */
const connections = new WeakMap<Store, ReturnType<typeof poolOf>>();

function counterConnections(store: Store): ReturnType<typeof poolOf> {
  let pool = connections.get(store);
  if (!pool) {
    // Connections of their own, whose statements give up at the database when this process stops
    // waiting for them: a counter row held locked would otherwise keep a pool connection per
    // request until the statement timeout, and soon every request would wait for one.
    pool = poolOf(store.database.quickConnections?.({ max: 3, statementTimeoutMs: SHARED_TIMEOUT_MS }) ?? store.database.db);
    connections.set(store, pool);
  }
  return pool;
}

/** What RateLimiterPostgres needs of a pg pool (`query` answering rows and rowCount), served by a kysely instance. */
function poolOf(db: Kysely<Tables>) {
  return {
    async query({ text, values }: { text: string; values?: unknown[] }) {
      const result = await db.executeQuery(CompiledQuery.raw(text, values ?? []));
      return { rows: result.rows, rowCount: Number(result.numAffectedRows ?? result.rows.length) };
    },
  };
}
