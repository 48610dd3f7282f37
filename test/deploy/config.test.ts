// Start-up configuration: every variable README lists keeps its default, a bad value stops the
// process with a line naming the variable and what it must be, and capturing messages in production
// is said loudly.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { startServerProcess } from '../support/process.ts';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-config-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('loadConfig', () => {
  it('keeps the defaults README lists, and treats an empty variable as unset', () => {
    const config = loadConfig({ PORT: '', SMTP_URL: '' });
    expect(config).toMatchObject({
      port: 3000,
      host: '127.0.0.1',
      databaseUrl: undefined,
      logLevel: 'info',
      bodyLimit: '4mb',
      rateLimitPerSecond: 10,
      smtpUrl: undefined,
      deliveryWorker: true,
      delivery: { maxAttempts: 8, retryBaseMs: 2000, leaseMs: 60_000 },
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5000,
      streamStallTimeoutMs: 30_000,
      shutdownGraceMs: 10_000,
      databaseConnectTimeoutMs: 5000,
      databaseStatementTimeoutMs: 30_000,
    });
    expect(config.dataDir).toBe(join(process.cwd(), 'data'));
  });

  it('reads what is given', () => {
    const config = loadConfig({ PORT: '8080', DATABASE_URL: 'postgres://u@db/mailroom', SMTP_URL: 'smtps://relay:465', DELIVERY_WORKER: 'off', LOG_LEVEL: 'warn', BODY_LIMIT: '512kb' });
    expect(config).toMatchObject({ port: 8080, databaseUrl: 'postgres://u@db/mailroom', smtpUrl: 'smtps://relay:465', deliveryWorker: false, logLevel: 'warn', bodyLimit: '512kb' });
  });

  it('has no bounce domain and no inbound listener unless given, and reads them when they are', () => {
    expect(loadConfig({})).toMatchObject({ inbound: undefined, delivery: { bounceDomain: undefined } });
    expect(loadConfig({ BOUNCE_DOMAIN: 'Bounces.Acme.dev', INBOUND_SMTP_PORT: '2525' })).toMatchObject({ inbound: { port: 2525, host: '127.0.0.1' }, delivery: { bounceDomain: 'bounces.acme.dev' } });
    expect(loadConfig({ INBOUND_SMTP_PORT: '25', INBOUND_SMTP_HOST: '0.0.0.0' }).inbound).toEqual({ port: 25, host: '0.0.0.0' });
  });

  it.each([
    ['PORT', 'abc', /PORT must be a whole number from 0 to 65535, got "abc"/],
    ['PORT', '70000', /PORT must be a whole number from 0 to 65535, got "70000"/],
    ['SHUTDOWN_GRACE_MS', '10s', /SHUTDOWN_GRACE_MS must be a whole number of at least 0, got "10s"/],
    ['RATE_LIMIT_PER_SECOND', '-1', /RATE_LIMIT_PER_SECOND must be a whole number/],
    ['DELIVERY_MAX_ATTEMPTS', '0', /DELIVERY_MAX_ATTEMPTS must be a whole number of at least 1/],
    ['DELIVERY_WORKER', 'no', /DELIVERY_WORKER must be on or off, got "no"/],
    ['LOG_LEVEL', 'verbose', /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/],
    ['BODY_LIMIT', 'lots', /BODY_LIMIT must be a size such as 4mb/],
    ['SMTP_URL', 'relay.example.com:25', /SMTP_URL must be a URL starting with smtp:\/\/ or smtps:\/\//],
    ['DATABASE_URL', 'mysql://u:secret@db/x', /DATABASE_URL must be a URL starting with postgres:\/\/ or postgresql:\/\//],
    ['BOUNCE_DOMAIN', 'localhost', /BOUNCE_DOMAIN must be a domain name such as bounces.example.com, got "localhost"/],
    ['BOUNCE_DOMAIN', 'bounces+x@acme.dev', /BOUNCE_DOMAIN must be a domain name/],
    ['INBOUND_SMTP_PORT', '99999', /INBOUND_SMTP_PORT must be a whole number from 0 to 65535, got "99999"/],
  ])('refuses %s=%s, saying what it must be', (name, value, message) => {
    expect(() => loadConfig({ [name]: value })).toThrow(message);
  });

  it('names every bad variable at once, and never echoes one that may hold a password', () => {
    let message = '';
    try {
      loadConfig({ PORT: 'x', DATABASE_URL: 'mysql://u:secret@db/x' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/PORT/);
    expect(message).toMatch(/DATABASE_URL/);
    expect(message).not.toContain('secret');
  });

  it("reads the webhook settings: Resend's retry schedule unless set, and a lease longer than an attempt", () => {
    expect(loadConfig({}).webhooks).toEqual({
      allowPrivate: false, timeoutMs: 10_000, retryScheduleMs: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
      leaseMs: 60_000, concurrency: 50, idleMs: 250, disableAfterFailed: 5, keepEndedMs: 30 * 24 * 3600_000,
    });
    const set = loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '10,20', WEBHOOK_TIMEOUT_MS: '90000', WEBHOOK_DISABLE_AFTER_FAILED: '0', WEBHOOK_KEEP_DAYS: '7' });
    expect(set.webhooks).toMatchObject({ allowPrivate: true, retryScheduleMs: [10, 20], timeoutMs: 90_000, leaseMs: 120_000, disableAfterFailed: 0, keepEndedMs: 7 * 24 * 3600_000 });
    expect(() => loadConfig({ WEBHOOK_KEEP_DAYS: '0' })).toThrow(/WEBHOOK_KEEP_DAYS/);
    expect(() => loadConfig({ WEBHOOK_TIMEOUT_MS: '5000', WEBHOOK_LEASE_MS: '5000' })).toThrow(/WEBHOOK_LEASE_MS must be longer than WEBHOOK_TIMEOUT_MS/);
    expect(() => loadConfig({ WEBHOOK_RETRY_SCHEDULE_MS: '5s,1m' })).toThrow(/WEBHOOK_RETRY_SCHEDULE_MS must be 1 to 20 whole numbers/);
    expect(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'yes' })).toThrow(/WEBHOOK_ALLOW_PRIVATE must be true or false/);
  });
});

describe('the server process', () => {
  it('stops at start with code 1 and a message naming a bad variable', async () => {
    const failed = await run(process.execPath, ['build/main.js'], { cwd: root, env: { ...process.env, DATA_DIR: dataDir, PORT: 'eighty' } }).catch((error) => error);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/Mailroom could not start: invalid configuration:\n\s+PORT must be a whole number from 0 to 65535, got "eighty"/);
  });

  it('warns when NODE_ENV=production and no SMTP_URL is set: messages are captured, not sent', async () => {
    const server = await startServerProcess({ DATA_DIR: dataDir, NODE_ENV: 'production', SMTP_URL: '' });
    try {
      for (let i = 0; i < 200 && !/"level":40.*SMTP_URL/.test(server.output()); i++) await new Promise((r) => setTimeout(r, 25));
      expect(server.output()).toMatch(/"level":40.*"msg":"SMTP_URL is not set: messages are captured in the store and marked delivered, not sent/);
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
  });
});
