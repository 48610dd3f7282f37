// Configuration comes from environment variables only; README lists them.
import { resolve } from 'node:path';

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
  /** Requests per second allowed per API key; 0 turns rate limiting off. */
  rateLimitPerSecond: number;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    port: integer(env.PORT, 3000, 'PORT'),
    host: env.HOST || '127.0.0.1',
    dataDir: resolve(env.DATA_DIR || './data'),
    databaseUrl: env.DATABASE_URL || undefined,
    apiKey: env.MAILROOM_API_KEY || undefined,
    logLevel: env.LOG_LEVEL || 'info',
    bodyLimit: env.BODY_LIMIT || '4mb',
    rateLimitPerSecond: integer(env.RATE_LIMIT_PER_SECOND, 0, 'RATE_LIMIT_PER_SECOND'),
  };
}

function integer(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got "${value}"`);
  return n;
}
