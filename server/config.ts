// Configuration comes from environment variables only; README lists them.
import { resolve } from 'node:path';
import { DEFAULT_DELIVERY, type DeliveryOptions } from './delivery/worker.ts';

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
  /** An smtp:// or smtps:// relay; unset, messages are captured in the store. */
  smtpUrl: string | undefined;
  /** Whether `npm start` runs a delivery worker (in a thread) beside the HTTP server. */
  deliveryWorker: boolean;
  delivery: DeliveryOptions;
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
    rateLimitPerSecond: integer(env.RATE_LIMIT_PER_SECOND, 10, 'RATE_LIMIT_PER_SECOND'),
    smtpUrl: env.SMTP_URL || undefined,
    deliveryWorker: env.DELIVERY_WORKER !== 'off',
    delivery: {
      ...DEFAULT_DELIVERY,
      maxAttempts: integer(env.DELIVERY_MAX_ATTEMPTS, DEFAULT_DELIVERY.maxAttempts, 'DELIVERY_MAX_ATTEMPTS'),
      retryBaseMs: integer(env.DELIVERY_RETRY_BASE_MS, DEFAULT_DELIVERY.retryBaseMs, 'DELIVERY_RETRY_BASE_MS'),
      leaseMs: integer(env.DELIVERY_LEASE_MS, DEFAULT_DELIVERY.leaseMs, 'DELIVERY_LEASE_MS'),
    },
    headersTimeoutMs: integer(env.HEADERS_TIMEOUT_MS, 10_000, 'HEADERS_TIMEOUT_MS'),
    requestTimeoutMs: integer(env.REQUEST_TIMEOUT_MS, 30_000, 'REQUEST_TIMEOUT_MS'),
    keepAliveTimeoutMs: integer(env.KEEP_ALIVE_TIMEOUT_MS, 5_000, 'KEEP_ALIVE_TIMEOUT_MS'),
    streamStallTimeoutMs: integer(env.STREAM_STALL_TIMEOUT_MS, 30_000, 'STREAM_STALL_TIMEOUT_MS'),
    shutdownGraceMs: integer(env.SHUTDOWN_GRACE_MS, 10_000, 'SHUTDOWN_GRACE_MS'),
    databaseConnectTimeoutMs: integer(env.DATABASE_CONNECT_TIMEOUT_MS, 5_000, 'DATABASE_CONNECT_TIMEOUT_MS'),
    databaseStatementTimeoutMs: integer(env.DATABASE_STATEMENT_TIMEOUT_MS, 30_000, 'DATABASE_STATEMENT_TIMEOUT_MS'),
    corsOrigins: (env.CORS_ORIGINS ?? '').split(',').map((origin) => origin.trim()).filter(Boolean),
    metrics: env.METRICS !== 'off',
  };
}

function integer(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, got "${value}"`);
  return n;
}
