// Prometheus metrics (GET /metrics, METRICS=off turns it off): requests by operation and status with
// their durations, requests refused for what they carried, requests the rate limit counted in this
// process alone, the outbox and delivery outcomes, the PostgreSQL pool, and the process's own
// (prom-client's default metrics).
//
// Outbox and delivery figures are read from the database at scrape time rather than counted in memory:
// delivery workers run in a thread (npm start) or in processes of their own (npm run worker), whose
// counters this process's registry would never see, while the database holds every worker's outcomes.
// They are the same from every process sharing one database: aggregate them with max, not sum.
import type { Request, RequestHandler, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { EmailEvent } from './store/database.ts';
import type { Store } from './store/index.ts';

/**
 * Every state an email can be in, so that a state with no emails reads 0 rather than vanishing: a
 * Record, so that the compiler names a state the contract adds and this leaves out.
 */
const EMAIL_STATES = Object.keys({
  queued: true, scheduled: true, delivery_delayed: true, sent: true, delivered: true, failed: true, bounced: true, complained: true, suppressed: true, canceled: true,
} satisfies Record<EmailEvent, true>) as EmailEvent[];
/** Statuses the contract uses for a request refused for its content: malformed (400) or invalid (422). */
const REFUSED_FOR_CONTENT = new Set([400, 422]);

export interface Metrics {
  /** Times and counts every request; mounted first. */
  observe: RequestHandler;
  /** Answers GET /metrics. */
  scrape: RequestHandler;
  /** Counts a request the rate limit counted in this process because the shared counters did not answer. */
  countedLocally: () => void;
}

/** The process's default metrics: registered once, however many apps one process creates (tests do). */
let processRegistry: Registry | undefined;

export function createMetrics(store: Store, logger: Logger, pagePaths: readonly string[]): Metrics {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  const own = new Registry();
  const registers = [own];
  const requests = new Histogram({
    name: 'mailroom_http_request_duration_seconds',
    help: 'HTTP requests by operation (operationId; a page path, preflight or unmatched outside the contract) and status, by time to the last byte.',
    labelNames: ['operation', 'method', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const refused = new Counter({
    name: 'mailroom_http_request_validation_failures_total',
    help: 'Requests refused for what they carried: 400 (malformed) or 422 (a field breaks the contract or a rule), by operation.',
    labelNames: ['operation', 'status'],
    registers,
  });
  const outbox = new Gauge({ name: 'mailroom_outbox_emails', help: 'Emails by state (their last event), read from the database.', labelNames: ['state'], registers });
  // Counters whose count the database keeps (emails are never deleted, and attempts only grow).
  const deliveries = new Counter({ name: 'mailroom_deliveries_total', help: 'Deliveries finished, by outcome (sent to a relay, delivered, failed, bounced, suppressed), by every worker.', labelNames: ['outcome'], registers });
  const attempts = new Counter({ name: 'mailroom_delivery_attempts_total', help: 'Emails taken up for delivery by every worker, each time: tries at the relay, failed ones included, and the takings that withdrew an email before any (suppressed, canceled).', registers });
  const localCounts = new Counter({
    name: 'mailroom_rate_limit_local_counts_total',
    help: 'Requests this process rate-limited by its own count because the counters shared in PostgreSQL did not answer in time: while it grows, each process enforces the limit alone.',
    registers,
  });
  const databaseUp = new Gauge({ name: 'mailroom_database_up', help: '1 when the outbox could be read at this scrape, 0 when the database did not answer.', registers });
  const usage = store.database.poolUsage;
  if (usage) {
    new Gauge({
      name: 'mailroom_database_pool_connections',
      help: 'PostgreSQL pool: connections open (total), idle, callers waiting for one, and the pool size (max).',
      labelNames: ['state'],
      registers,
      collect() {
        for (const [state, count] of Object.entries(usage())) this.set({ state }, count);
      },
    });
  }
  const registry = Registry.merge([processRegistry, own]);
  const pages = new Set(pagePaths);

  const operationOf = (req: Request): string => {
    const operationId = req.openapi?.schema?.operationId;
    if (operationId) return operationId;
    if (req.method === 'OPTIONS' && req.get('access-control-request-method')) return 'preflight';
    // Only fixed paths become labels: a label per unknown path would grow without bound.
    const path = new URL(req.originalUrl, 'http://x').pathname;
    return pages.has(path) ? path : 'unmatched';
  };

  const observe: RequestHandler = (req, res, next) => {
    const stop = requests.startTimer();
    const { method } = req; // as it came: HEAD is answered as GET (server/head.ts)
    res.on('finish', () => {
      const operation = operationOf(req);
      stop({ operation, method, status: res.statusCode });
      if (REFUSED_FOR_CONTENT.has(res.statusCode)) refused.inc({ operation, status: res.statusCode });
    });
    next();
  };

  const scrape: RequestHandler = async (_req, res: Response) => {
    try {
      const states = new Map((await store.metrics.outbox()).map((row) => [row.state, row]));
      // Set in one go after the query, so that two scrapes at once cannot mix their figures.
      for (const state of EMAIL_STATES) outbox.set({ state }, states.get(state)?.emails ?? 0);
      deliveries.reset();
      for (const outcome of ['sent', 'delivered', 'failed', 'bounced', 'suppressed'] as const) deliveries.inc({ outcome }, states.get(outcome)?.emails ?? 0);
      attempts.reset();
      attempts.inc([...states.values()].reduce((sum, row) => sum + row.attempts, 0));
      databaseUp.set(1);
    } catch (err) {
      // The last figures stay (a counter must not drop to 0), and the rest is still served: a scrape
      // that failed whole would hide the process just when it matters.
      logger.warn({ err }, 'metrics: the outbox could not be read');
      databaseUp.set(0);
    }
    res.type(registry.contentType).send(await registry.metrics());
  };

  return { observe, scrape, countedLocally: () => localCounts.inc() };
}
