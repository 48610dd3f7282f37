// The container image as an operator runs it: built from the Dockerfile, run against PostgreSQL and
// an SMTP relay on this machine, healthy, sending a batch that reaches the relay, and stopped by
// `podman stop` (SIGTERM, then SIGKILL after 10 s) with exit code 0 well before the SIGKILL.
// Skips with a line saying so where podman is not installed, except under CI=true (.ci/run installs it).
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresSchema } from '../support/backends.ts';
import { freePort } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { startSmtpSink, type SmtpSink } from '../support/smtp.ts';
import { until, WAIT_MS } from '../support/until.ts';
import { buildStageOnHost, podman, podmanInstalled, root, RUN_FLAGS, standInNodeImage } from './image.ts';

const installed = podmanInstalled();
if (!installed) {
  if (process.env.CI === 'true') throw new Error('podman is not installed, and CI=true does not allow skipping the image test');
  console.warn('podman is not installed: skipping the container image test (apt-get install podman buildah runc; CI=true makes this a failure)');
}

const image = 'localhost/mailroom:test';
const container = `mailroom-test-${process.pid}`;
let context = '';

describe.skipIf(!installed)('the container image', () => {
  let base = '';
  beforeAll(async () => {
    base = await standInNodeImage();
    context = buildStageOnHost();
    const started = performance.now();
    await podman(['build', ...RUN_FLAGS, '--format', 'docker', '--build-context', `build=${context}`, '--build-arg', `NODE_IMAGE=${base}`, '-t', image, root], 300_000);
    console.log(`image built in ${Math.round(performance.now() - started)} ms`);
  }, 400_000);

  afterAll(async () => {
    await podman(['rm', '-f', '-t', '0', container]).catch(() => {});
    await podman(['rmi', '-f', image]).catch(() => {});
    if (context) rmSync(context, { recursive: true, force: true });
  });

  it('runs as a non-root user, serves on PostgreSQL, delivers a batch over SMTP, and stops with code 0 on podman stop', async () => {
    const sizes = await Promise.all([image, base].map((tag) => podman(['image', 'inspect', '--format', '{{.Size}}', tag]).then(Number)));
    console.log(`image ${(sizes[0]! / 1e6).toFixed(1)} MB, of which the stand-in Node base ${(sizes[1]! / 1e6).toFixed(1)} MB and Mailroom ${((sizes[0]! - sizes[1]!) / 1e6).toFixed(1)} MB`);
    expect(await podman(['image', 'inspect', '--format', '{{.Config.User}}', image])).toBe('node');

    const schema = await postgresSchema();
    const sink: SmtpSink = await startSmtpSink();
    try {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      // Host networking reaches PostgreSQL and the relay on 127.0.0.1; HOST keeps the API on it too.
      // The image is production, which refuses mail from domains not registered: acme.dev is not.
      await podman(['run', '-d', ...RUN_FLAGS, '--network', 'host', '--name', container,
        '-e', `PORT=${port}`, '-e', 'HOST=127.0.0.1', '-e', `DATABASE_URL=${schema.url}`, '-e', `SMTP_URL=${sink.url}`, '-e', 'REQUIRE_VERIFIED_DOMAIN=false',
        '-e', `MAILROOM_API_KEY=${TEST_KEY}`, '-e', 'RATE_LIMIT_PER_SECOND=0', '-e', 'SHUTDOWN_GRACE_MS=5000', image]);

      const health = () => fetch(`${url}/health`).then((r) => r.status, () => 0);
      await until(async () => (await health()) === 200, async () => `/health 200 from the container: ${await podman(['logs', container])}`, WAIT_MS, 200);
      // The image's own HEALTHCHECK command, run in the container.
      await podman(['healthcheck', 'run', container]);
      // The dashboard is built into the image: its page, with its policy, and its script.
      const dashboard = await fetch(`${url}/dashboard/contacts`);
      expect(dashboard.status).toBe(200);
      expect(dashboard.headers.get('content-security-policy')).toContain("script-src 'self'");
      const script = /src="(\/dashboard\/assets\/dashboard\.js[^"]*)"/.exec(await dashboard.text())?.[1];
      const bundle = await fetch(`${url}${script}`);
      expect([bundle.status, bundle.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8']);

      const batch = await fetch(`${url}/emails/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify([
          { from: 'Acme <news@acme.dev>', to: 'steve@example.com', subject: 'Hello from the image', text: 'Hi Steve' },
          { from: 'Acme <news@acme.dev>', to: 'ada@example.com', subject: 'Hello from the image', text: 'Hi Ada' },
        ]),
      });
      expect(batch.status).toBe(200);
      await sink.waitFor(2);
      expect(sink.received.map((r) => r.envelope.to[0]).sort()).toEqual(['ada@example.com', 'steve@example.com']);

      const asked = performance.now();
      await podman(['stop', '-t', '10', container], 30_000);
      const stopMs = Math.round(performance.now() - asked);
      console.log(`podman stop took ${stopMs} ms`);
      expect(await podman(['inspect', '--format', '{{.State.ExitCode}}', container])).toBe('0');
      expect(stopMs).toBeLessThan(10_000); // podman stop -t 10 would have sent SIGKILL (exit 137) by then
      expect(await podman(['logs', container])).toMatch(/"msg":"Mailroom stopped"/);
    } finally {
      await podman(['rm', '-f', '-t', '0', container]).catch(() => {});
      await sink.close();
      await schema.drop();
    }
  });
});
