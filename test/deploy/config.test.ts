// Start-up configuration: every variable README lists keeps its default, a bad value stops the
// process with a line naming the variable and what it must be, and capturing messages in production
// must be asked for, and is then said loudly.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, refuseUnsentMail } from '../../server/config.ts';
import { backends, POSTGRES_URL } from '../support/backends.ts';
import { startServerProcess } from '../support/process.ts';
import { until } from '../support/until.ts';

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
      authFailuresPerMinute: 30,
      smtpUrl: undefined,
      captureAsked: false,
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

  it('reads SMTP_URL=capture: as capture asked for, which production needs: unset, it refuses naming SMTP_URL and NODE_ENV', () => {
    expect(loadConfig({ SMTP_URL: 'capture:' })).toMatchObject({ smtpUrl: undefined, captureAsked: true });
    expect(loadConfig({ SMTP_URL: 'Capture:' })).toMatchObject({ smtpUrl: undefined, captureAsked: true });
    const unsent = /^invalid configuration: SMTP_URL is not set, and with NODE_ENV=production mail would be kept in the store, never sent, and reported delivered: set SMTP_URL to your relay \(smtp:\/\/ or smtps:\/\/\), or to capture: to capture mail on purpose$/;
    for (const env of [{ NODE_ENV: 'production' }, { NODE_ENV: 'production', SMTP_URL: '' }]) {
      expect(() => refuseUnsentMail(loadConfig(env))).toThrow(ConfigError);
      expect(() => refuseUnsentMail(loadConfig(env))).toThrow(unsent);
    }
    for (const env of [{}, { SMTP_URL: 'capture:' }, { NODE_ENV: 'production', SMTP_URL: 'capture:' }, { NODE_ENV: 'production', SMTP_URL: 'smtp://relay.example.com:587' }, { NODE_ENV: 'development' }]) {
      expect(() => refuseUnsentMail(loadConfig(env)), JSON.stringify(env)).not.toThrow();
    }
  });

  it('has no bounce domain and no inbound listener unless given, and reads them when they are', () => {
    expect(loadConfig({})).toMatchObject({ inbound: undefined, delivery: { bounceDomain: undefined } });
    expect(loadConfig({ BOUNCE_DOMAIN: 'Bounces.Acme.dev', INBOUND_SMTP_PORT: '2525' })).toMatchObject({ inbound: { port: 2525, host: '127.0.0.1' }, delivery: { bounceDomain: 'bounces.acme.dev' } });
    expect(loadConfig({ INBOUND_SMTP_PORT: '25', INBOUND_SMTP_HOST: '0.0.0.0' }).inbound).toEqual({ port: 25, host: '0.0.0.0' });
  });

  it('reads the sending domains\' settings: resolvers, the check interval, the MX host, and whether a domain must be registered', () => {
    expect(loadConfig({}).domains).toEqual({ dnsServers: [], requireRegistered: false, checkIntervalMs: 6 * 3600_000, bounceDomain: undefined, mxHost: undefined });
    expect(loadConfig({ DNS_SERVERS: '127.0.0.1:5353,[::1]:53,10.0.0.2', DOMAIN_CHECK_INTERVAL_MS: '60000', BOUNCE_DOMAIN: 'Bounces.Acme.dev' }).domains).toEqual({
      dnsServers: ['127.0.0.1:5353', '[::1]:53', '10.0.0.2'], requireRegistered: false, checkIntervalMs: 60_000, bounceDomain: 'bounces.acme.dev', mxHost: 'bounces.acme.dev',
    });
    expect(loadConfig({ BOUNCE_DOMAIN: 'bounces.acme.dev', INBOUND_MX_HOST: 'MX.Acme.dev' }).domains.mxHost).toBe('mx.acme.dev');
    expect(() => loadConfig({ DNS_SERVERS: 'dns.example.com' })).toThrow(/DNS_SERVERS must be a comma-separated list of IP addresses/);
    for (const bad of ['127.0.0.1:53,', '999.1.1.1', '127.0.0.1:0', '127.0.0.1:65536', '::1', '[127.0.0.1]', '[::1]:x']) {
      expect(() => loadConfig({ DNS_SERVERS: bad }), bad).toThrow(/DNS_SERVERS must be a comma-separated list of IP addresses/);
    }
    expect(() => loadConfig({ DOMAIN_CHECK_INTERVAL_MS: '10' })).toThrow(/DOMAIN_CHECK_INTERVAL_MS must be a whole number from 1000/);
    expect(() => loadConfig({ INBOUND_MX_HOST: 'not a host' })).toThrow(/INBOUND_MX_HOST must be a host name/);
    expect(() => loadConfig({ REQUIRE_VERIFIED_DOMAIN: 'yes' })).toThrow(/REQUIRE_VERIFIED_DOMAIN must be true or false/);
  });

  it.each([
    ['PORT', 'abc', /PORT must be a whole number from 0 to 65535, got "abc"/],
    ['PORT', '70000', /PORT must be a whole number from 0 to 65535, got "70000"/],
    ['SHUTDOWN_GRACE_MS', '10s', /SHUTDOWN_GRACE_MS must be a whole number from 0 to 2147483647, got "10s"/],
    // Past 2^31 - 1 ms, Node's timers fire after 1 ms: a grace of a month would be none.
    ['SHUTDOWN_GRACE_MS', '2147483648', /SHUTDOWN_GRACE_MS must be a whole number from 0 to 2147483647, got "2147483648"/],
    ['DELIVERY_LEASE_MS', '9999999999', /DELIVERY_LEASE_MS must be a whole number from 1000 to 2147483647/],
    ['DELIVERY_LEASE_MS', '60', /DELIVERY_LEASE_MS must be a whole number from 1000 to 2147483647/],
    ['FANOUT_LEASE_MS', '2147483648', /FANOUT_LEASE_MS must be a whole number from 1000 to 2147483647/],
    ['WEBHOOK_TIMEOUT_MS', '10', /WEBHOOK_TIMEOUT_MS must be a whole number from 100 to 600000/],
    ['MAILROOM_API_KEY', ' ', /MAILROOM_API_KEY must be at least 16 characters, printable ASCII without spaces/],
    ['MAILROOM_API_KEY', 're_test_key_1234567€', /MAILROOM_API_KEY must be at least 16 characters, printable ASCII/],
    ['MAILROOM_API_KEY', 're_short', /MAILROOM_API_KEY must be at least 16 characters/],
    ['DATABASE_CONNECT_TIMEOUT_MS', '2147483648', /DATABASE_CONNECT_TIMEOUT_MS must be a whole number from 100 to 2147483647/],
    // 0 is pg's "wait for ever": a database that takes connections and never answers hung start-up.
    ['DATABASE_CONNECT_TIMEOUT_MS', '0', /DATABASE_CONNECT_TIMEOUT_MS must be a whole number from 100 to 2147483647/],
    ['DATABASE_STATEMENT_TIMEOUT_MS', '2147483647', /DATABASE_STATEMENT_TIMEOUT_MS must be a whole number from 0 to 2147478647/],
    ['HEADERS_TIMEOUT_MS', '2147483648', /HEADERS_TIMEOUT_MS must be a whole number from 0 to 2147483647/],
    ['REQUEST_TIMEOUT_MS', '2147483648', /REQUEST_TIMEOUT_MS must be a whole number from 0 to 2147483647/],
    // Node adds a second to it for its own timer, which then overflowed with a warning at start.
    ['KEEP_ALIVE_TIMEOUT_MS', '2147483647', /KEEP_ALIVE_TIMEOUT_MS must be a whole number from 0 to 2147482647/],
    ['STREAM_STALL_TIMEOUT_MS', '2147483648', /STREAM_STALL_TIMEOUT_MS must be a whole number from 0 to 2147483647/],
    ['DELIVERY_RETRY_BASE_MS', '2147483648', /DELIVERY_RETRY_BASE_MS must be a whole number from 0 to 2147483647/],
    ['WEBHOOK_LEASE_MS', '2147483648', /WEBHOOK_LEASE_MS must be a whole number from 1000 to 2147483647/],
    ['WEBHOOK_RETRY_SCHEDULE_MS', '5000,2147483648', /WEBHOOK_RETRY_SCHEDULE_MS must be 1 to 20 whole numbers of milliseconds up to 2147483647/],
    ['SMTP_URL', 'smtp://', /SMTP_URL must be a URL starting with smtp:\/\/ or smtps:\/\/, naming a host/],
    ['SMTP_URL', 'smtps://:465', /SMTP_URL must be a URL starting with smtp:\/\/ or smtps:\/\/, naming a host/],
    ['SMTP_URL', 'capture', /SMTP_URL must be a URL starting with smtp:\/\/ or smtps:\/\/, naming a host, or capture:$/],
    ['SMTP_URL', 'capture://relay', /SMTP_URL must be a URL starting with smtp:\/\/ or smtps:\/\/, naming a host, or capture:$/],
    ['RATE_LIMIT_PER_SECOND', '-1', /RATE_LIMIT_PER_SECOND must be a whole number/],
    ['AUTH_FAILURES_PER_MINUTE', 'lots', /AUTH_FAILURES_PER_MINUTE must be a whole number of at least 0, got "lots"/],
    ['DELIVERY_MAX_ATTEMPTS', '0', /DELIVERY_MAX_ATTEMPTS must be a whole number of at least 1/],
    ['DELIVERY_WORKER', 'no', /DELIVERY_WORKER must be on or off, got "no"/],
    ['LOG_LEVEL', 'verbose', /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/],
    ['BODY_LIMIT', 'lots', /BODY_LIMIT must be a size such as 4mb/],
    ['BODY_LIMIT', '0', /BODY_LIMIT must be at least 1kb/],
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
  it('stops at start with code 1 and a message naming a bad variable: on its one line, or each on a line of its own', async () => {
    const failed = await run(process.execPath, ['build/main.js'], { cwd: root, env: { ...process.env, DATA_DIR: dataDir, PORT: 'eighty' } }).catch((error) => error);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^Mailroom could not start: invalid configuration: PORT must be a whole number from 0 to 65535, got "eighty"$/m);
    const two = await run(process.execPath, ['build/main.js'], { cwd: root, env: { ...process.env, DATA_DIR: dataDir, PORT: 'eighty', METRICS: 'yes' } }).catch((error) => error);
    expect(two.code).toBe(1);
    expect(two.stderr).toMatch(/Mailroom could not start: invalid configuration:\n\s+PORT must be a whole number from 0 to 65535, got "eighty"\n\s+METRICS must be on or off/);
  });

  it.each([
    ['build/worker.js', "Mailroom's delivery worker could not start"],
    ['build/keys.js', "Mailroom's keys command could not run"],
    ['build/main.js', 'Mailroom could not start'],
  ])('%s says in one line, naming the variable, why its store cannot be used, and exits 1', async (script, prefix) => {
    const args = script === 'build/keys.js' ? ['create', '--name', 'ops'] : [];
    const attempt = (env: Record<string, string>) =>
      run(process.execPath, [script, ...args], { cwd: root, env: { ...process.env, PORT: '0', DATA_DIR: dataDir, DATABASE_URL: '', ...env } }).then(
        () => ({ code: 0, stderr: '' }),
        (error) => error as { code: number; stderr: string },
      );
    const cases: [Record<string, string>, RegExp][] = [
      [{ DATABASE_URL: 'postgres://postgres:hunter2@127.0.0.1:5499/x' }, /cannot connect to the database at DATABASE_URL \(PostgreSQL database "x" on 127\.0\.0\.1:5499 as postgres\): .*ECONNREFUSED/],
      [{ DATA_DIR: '/etc/passwd' }, /DATA_DIR \/etc\/passwd is not a directory that can be written: it is a file/],
      [{ DATA_DIR: '/etc/passwd/mailroom' }, /DATA_DIR \/etc\/passwd\/mailroom is not a directory that can be written: part of its path is a file/],
      // Node's own recursive mkdir loops for ever where the system answers ENOENT under an existing parent.
      [{ DATA_DIR: '/proc/mailroom/data' }, /DATA_DIR \/proc\/mailroom\/data is not a directory that can be written: the system does not allow a directory there/],
    ];
    if (backends.includes('postgres')) {
      const missing = new URL(POSTGRES_URL);
      missing.pathname = '/mailroom_no_such_database';
      missing.password = 'hunter2';
      cases.push([{ DATABASE_URL: missing.href }, /cannot connect to the database at DATABASE_URL \(PostgreSQL database "mailroom_no_such_database" .*\): database "mailroom_no_such_database" does not exist/]);
    }
    for (const [env, said] of cases) {
      const failed = await attempt(env);
      expect(failed.code, JSON.stringify(env)).toBe(1);
      const lines = failed.stderr.split('\n').filter((line) => line && !line.startsWith('Store: '));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^${prefix}: ${said.source}`));
      expect(failed.stderr).not.toContain('hunter2');
    }
  });

  it.each(['build/main.js', 'build/worker.js'])('%s stops with code 1 when the inbound listener cannot listen, naming INBOUND_SMTP_PORT and INBOUND_SMTP_HOST', async (script) => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = String((taken.address() as AddressInfo).port);
    try {
      for (const [env, said] of [
        [{ INBOUND_SMTP_PORT: port }, /INBOUND_SMTP_HOST 127\.0\.0\.1, INBOUND_SMTP_PORT \d+: EADDRINUSE/],
        [{ INBOUND_SMTP_PORT: '0', INBOUND_SMTP_HOST: 'garbage.invalid' }, /INBOUND_SMTP_HOST garbage\.invalid, INBOUND_SMTP_PORT 0: (ENOTFOUND|EAI_AGAIN)/],
      ] as const) {
        const failed = await run(process.execPath, [script], { cwd: root, timeout: 60_000, env: { ...process.env, PORT: '0', DATA_DIR: dataDir, DATABASE_URL: '', MAILROOM_API_KEY: 're_test0000000000000000000000000000', ...env } }).then(
          () => ({ code: 0, stderr: '' }),
          (error) => error as { code: number; stderr: string },
        );
        expect(failed.code).toBe(1);
        expect(failed.stderr).toMatch(said);
        expect(failed.stderr).toMatch(/could not start: the inbound listener cannot listen/);
      }
    } finally {
      taken.close();
    }
  });

  it('stops with code 1 when the HTTP server cannot listen, naming HOST and PORT', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = String((taken.address() as AddressInfo).port);
    try {
      for (const [env, said] of [
        [{ PORT: port }, new RegExp(`^Mailroom could not start: the HTTP server cannot listen on HOST 127\\.0\\.0\\.1, PORT ${port}: EADDRINUSE$`, 'm')],
        [{ PORT: '0', HOST: 'garbage.invalid' }, /^Mailroom could not start: the HTTP server cannot listen on HOST garbage\.invalid, PORT 0: (ENOTFOUND|EAI_AGAIN)$/m],
      ] as const) {
        const failed = await run(process.execPath, ['build/main.js'], { cwd: root, timeout: 60_000, env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '', ...env } }).then(
          () => ({ code: 0, stderr: '' }),
          (error) => error as { code: number; stderr: string },
        );
        expect(failed.code).toBe(1);
        expect(failed.stderr).toMatch(said);
      }
    } finally {
      taken.close();
    }
  });

  it.each([
    ['build/main.js', 'Mailroom could not start'],
    ['build/worker.js', "Mailroom's delivery worker could not start"],
  ])('%s refuses to start with NODE_ENV=production and no SMTP_URL, in one line naming both, and exits 1', async (script, prefix) => {
    for (const smtpUrl of [undefined, '']) {
      const env: Record<string, string | undefined> = { ...process.env, PORT: '0', DATA_DIR: dataDir, DATABASE_URL: '', NODE_ENV: 'production', SMTP_URL: smtpUrl };
      if (smtpUrl === undefined) delete env.SMTP_URL;
      const failed = await run(process.execPath, [script], { cwd: root, timeout: 60_000, env }).then(
        () => ({ code: 0, stderr: '' }),
        (error) => error as { code: number; stderr: string },
      );
      expect(failed.code).toBe(1);
      expect(failed.stderr).toMatch(new RegExp(`^${prefix}: invalid configuration: SMTP_URL is not set, and with NODE_ENV=production mail would be kept in the store, never sent, and reported delivered: set SMTP_URL to your relay \\(smtp:// or smtps://\\), or to capture: to capture mail on purpose\n$`));
    }
  });

  it('starts with NODE_ENV=production and no SMTP_URL when it runs no delivery thread: it sends nothing itself', async () => {
    const server = await startServerProcess({ DATA_DIR: dataDir, NODE_ENV: 'production', SMTP_URL: '', DELIVERY_WORKER: 'off' });
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });

  it('captures with NODE_ENV=production when SMTP_URL=capture: asks for it, and warns that messages are not sent', async () => {
    const server = await startServerProcess({ DATA_DIR: dataDir, NODE_ENV: 'production', SMTP_URL: 'capture:' });
    try {
      await until(() => /"level":40.*SMTP_URL/.test(server.output()), 'the warning about SMTP_URL');
      expect(server.output()).toMatch(/"level":40.*"msg":"SMTP_URL is capture:, so messages are captured in the store and marked delivered, not sent/);
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
    }
  });
});
