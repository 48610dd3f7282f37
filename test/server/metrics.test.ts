// GET /metrics: Prometheus text after real traffic, real deliveries through an SMTP server on 127.0.0.1
// (one refused for good: bounced), and, on PostgreSQL, the pool's counts; METRICS=off removes it.
import { describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { deliverOnce } from '../support/delivery.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text format, samples only (comments skipped). */
function parse(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not a sample line: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => [k!, v!]));
      return { name: match[1]!, labels, value: Number(match[3]) };
    });
}

/** The one sample named `name` whose labels include `labels`. */
function sample(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

describe.each(backends)('metrics on %s', (backend) => {
  const sink = withSink();
  const server = withServer(backend);

  const json = (path: string, method: string, body: string) => server.request(path, { method, headers: { 'content-type': 'application/json' }, body });
  const scrape = async () => {
    // No key: a scraper carries none.
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parse(await res.text());
  };

  it('counts requests by operation and status, with durations, and the ones refused for their content', async () => {
    expect((await json('/contacts', 'POST', JSON.stringify({ email: `a-${backend}@example.com` }))).status).toBe(201);
    expect((await json('/contacts', 'POST', JSON.stringify({ email: `b-${backend}@example.com` }))).status).toBe(201);
    expect((await json('/contacts', 'POST', JSON.stringify({ email: 'not an address' }))).status).toBe(422);
    expect((await json('/contacts', 'POST', '{"email":')).status).toBe(400);
    expect((await server.request('/contacts?limit=5')).status).toBe(200);
    expect((await server.request('/no/such/path/123')).status).toBe(404);

    const samples = await scrape();
    const count = (labels: Record<string, string>) => sample(samples, 'mailroom_http_request_duration_seconds_count', labels);
    expect(count({ operation: 'createContact', method: 'POST', status: '201' })).toBe(2);
    expect(count({ operation: 'createContact', status: '422' })).toBe(1);
    expect(count({ operation: 'listContacts', method: 'GET', status: '200' })).toBe(1);
    // Unknown paths share one label, so that a scan of random URLs cannot grow the series without bound.
    expect(count({ operation: 'unmatched', status: '404' })).toBe(1);
    const seconds = sample(samples, 'mailroom_http_request_duration_seconds_sum', { operation: 'createContact', status: '201' })!;
    expect(seconds).toBeGreaterThan(0);
    expect(seconds).toBeLessThan(60);
    expect(sample(samples, 'mailroom_http_request_duration_seconds_bucket', { operation: 'createContact', status: '201', le: '+Inf' })).toBe(2);

    expect(sample(samples, 'mailroom_http_request_validation_failures_total', { operation: 'createContact', status: '422' })).toBe(1);
    // Malformed JSON is refused after auth, so under the operation it was sent to.
    expect(sample(samples, 'mailroom_http_request_validation_failures_total', { operation: 'createContact', status: '400' })).toBe(1);
    expect(sample(samples, 'mailroom_http_request_validation_failures_total', { operation: 'listContacts' })).toBeUndefined();

    // The scrape before this one is counted under its path.
    expect(count({ operation: '/metrics', method: 'GET', status: '200' })).toBeUndefined();
    expect(sample(await scrape(), 'mailroom_http_request_duration_seconds_count', { operation: '/metrics', status: '200' })).toBe(1);
  });

  it('reads the outbox and every worker’s delivery outcomes from the database', async () => {
    const send = (to: string) => ({ from: 'Acme <news@acme.dev>', to, subject: 'Hi', text: 'Hello' });
    const batch = await json('/emails/batch', 'POST', JSON.stringify([send('one@example.com'), send('two@example.com'), send('three@example.com')]));
    expect(batch.status).toBe(200);
    const before = await scrape();
    expect(sample(before, 'mailroom_outbox_emails', { state: 'queued' })).toBe(3);
    expect(sample(before, 'mailroom_outbox_emails', { state: 'delivered' })).toBe(0);
    // Every state the contract names has its series, at 0 while no email is in it.
    for (const state of ['complained', 'canceled']) expect(sample(before, 'mailroom_outbox_emails', { state }), state).toBe(0);
    expect(sample(before, 'mailroom_deliveries_total', { outcome: 'delivered' })).toBe(0);

    // A worker of its own, as `npm run worker` would be: its outcomes reach the metrics through the database.
    sink.refuse = (attempt) => (attempt === 2 ? 550 : undefined);
    expect(await deliverOnce(server, sink, { maxAttempts: 3 })).toBe(3);
    expect((await json('/emails/batch', 'POST', JSON.stringify([send('four@example.com')]))).status).toBe(200);

    const after = await scrape();
    expect(sample(after, 'mailroom_outbox_emails', { state: 'queued' })).toBe(1);
    expect(sample(after, 'mailroom_outbox_emails', { state: 'delivery_delayed' })).toBe(0);
    // A relay's acceptance is `sent`: the relay is not the recipient; its 550 is a Permanent bounce.
    expect(sample(after, 'mailroom_outbox_emails', { state: 'sent' })).toBe(2);
    expect(sample(after, 'mailroom_outbox_emails', { state: 'delivered' })).toBe(0);
    expect(sample(after, 'mailroom_outbox_emails', { state: 'bounced' })).toBe(1);
    expect(sample(after, 'mailroom_outbox_emails', { state: 'failed' })).toBe(0);
    expect(sample(after, 'mailroom_deliveries_total', { outcome: 'sent' })).toBe(2);
    expect(sample(after, 'mailroom_deliveries_total', { outcome: 'delivered' })).toBe(0);
    expect(sample(after, 'mailroom_deliveries_total', { outcome: 'bounced' })).toBe(1);
    expect(sample(after, 'mailroom_deliveries_total', { outcome: 'failed' })).toBe(0);
    expect(sample(after, 'mailroom_delivery_attempts_total')).toBe(3);
    expect(sample(after, 'mailroom_database_up')).toBe(1);
  });

  it('shows the PostgreSQL pool, and the process’s own metrics', async () => {
    const samples = await scrape();
    if (backend === 'postgres') {
      const pool = (state: string) => sample(samples, 'mailroom_database_pool_connections', { state });
      expect(pool('max')).toBe(10);
      expect(pool('total')).toBeGreaterThanOrEqual(1);
      expect(pool('total')).toBeLessThanOrEqual(10);
      expect(pool('idle')).toBeLessThanOrEqual(pool('total')!);
      expect(pool('waiting')).toBe(0);
    } else {
      expect(samples.some((s) => s.name === 'mailroom_database_pool_connections')).toBe(false);
    }
    expect(sample(samples, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(sample(samples, 'process_resident_memory_bytes')).toBeGreaterThan(1_000_000);
    expect(samples.some((s) => s.name === 'nodejs_eventloop_lag_seconds')).toBe(true);
  });
});

describe('with METRICS=off', () => {
  const server = withServer('sqlite', { config: { metrics: false } });

  it('has no /metrics', async () => {
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ statusCode: 404, name: 'not_found' });
  });
});
