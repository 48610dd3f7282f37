// Rate limiting per API key, as Resend does it: a one-second window of N requests per key; every
// response from the point the key is known says where the key stands (RateLimit-Limit, -Remaining,
// -Reset), and a request over the limit gets 429 rate_limit_exceeded with Retry-After. On PostgreSQL
// the counters live in the database (rate-limiter-flexible's RateLimiterPostgres, over a few
// connections of its own, in the table migration 0003 made), so every process sharing it shares the
// limit; on SQLite they live in this process.
//
// When the shared counters cannot be reached in time, requests are not refused or held for that
// alone: they are counted by this process instead (a log line says so, at most once a minute), so the
// limit still holds per process until the database answers again. Metrics count such requests.
import type { RequestHandler } from 'express';
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

export function rateLimit(perSecond: number, store: Store, logger: Logger, countedLocally: () => void = () => {}): RequestHandler {
  const options = { points: perSecond, duration: 1, keyPrefix: 'api_key' };
  const local = new RateLimiterMemory(options);
  const shared =
    store.database.dialect === 'postgres'
      ? new RateLimiterPostgres({
          ...options,
          // Connections of its own, whose statements give up at the database when this process stops
          // waiting for them: a counter row held locked would otherwise keep a pool connection per
          // request until the statement timeout, and soon every request would wait for one.
          storeClient: poolOf(store.database.quickConnections?.({ max: 3, statementTimeoutMs: SHARED_TIMEOUT_MS }) ?? store.database.db),
          storeType: 'pool',
          tableName: 'rate_limits',
          tableCreated: true,
          // A key over its limit is refused from memory until its window ends, as the database said:
          // a client hammering away costs the database one query per window and process.
          inMemoryBlockOnConsumed: perSecond + 1,
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

  async function standing(key: string): Promise<Standing> {
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
        logger.warn({ err }, 'rate limit counters in the database are unavailable; counting in this process');
      }
      return count(local, key);
    } finally {
      clearTimeout(timer);
    }
  }

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

/** What RateLimiterPostgres needs of a pg pool (`query` answering rows and rowCount), served by a kysely instance. */
function poolOf(db: Kysely<Tables>) {
  return {
    async query({ text, values }: { text: string; values?: unknown[] }) {
      const result = await db.executeQuery(CompiledQuery.raw(text, values ?? []));
      return { rows: result.rows, rowCount: Number(result.numAffectedRows ?? result.rows.length) };
    },
  };
}
