// What happened to an email, end to end with real parts: the built server with its delivery thread and
// inbound listener, a real SMTP relay on 127.0.0.1, delivery status notifications and a complaint
// report mailed to the listener as MTAs write them, and a webhook receiver on 127.0.0.1 that checks
// every delivery's signature as Standard Webhooks receivers do.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTransport } from 'nodemailer';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, postgresSchema } from '../support/backends.ts';
import { freePort, startServerProcess, type ServerProcess } from '../support/process.ts';
import { startReceiver, until, type Receiver } from '../support/receiver.ts';
import { arf, dsn } from '../support/reports.ts';
import { TEST_KEY } from '../support/server.ts';
import { startSmtpSink, type SmtpSink } from '../support/smtp.ts';

const BOUNCE_DOMAIN = 'bounces.mailroom.test';

describe.each(backends)('what happened to an email, on %s', (backend) => {
  let server: ServerProcess;
  let sink: SmtpSink;
  let receiver: Receiver;
  let inboundPort: number;
  let dataDir: string;
  let schema: Awaited<ReturnType<typeof postgresSchema>> | undefined;
  let verify: (body: string, headers: Record<string, string>) => { type: string; data: Record<string, any> };

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, { method, headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json() };
  };
  /** Every event the receiver got about `emailId`, in arrival order, each verified first. */
  const eventsFor = (emailId: string) =>
    receiver.received.map((r) => verify(r.body, r.headers as Record<string, string>)).filter((event) => event.data.email_id === emailId);
  const mailToListener = async (raw: string, to: string) => {
    const transport = createTransport({ host: '127.0.0.1', port: inboundPort, secure: false, ignoreTLS: true });
    try {
      await transport.sendMail({ envelope: { from: '', to: [to] }, raw });
    } finally {
      transport.close();
    }
  };
  /** Sends one email and waits until the relay has it; returns its id. */
  const sendTo = async (to: string) => {
    const before = sink.received.length;
    const { status, body } = await api('POST', '/emails', { from: 'Acme <team@acme.dev>', to, subject: 'Hello', text: 'Hi there' });
    expect(status).toBe(200);
    await sink.waitFor(before + 1);
    return body.id as string;
  };
  /** The return path the email's copy went out with, as the relay received it: where reports about it go. */
  const returnPathOf = (id: string) => sink.received.find((r) => r.mail.messageId === `<${id}@acme.dev>`)!.envelope.from;

  beforeAll(async () => {
    sink = await startSmtpSink();
    receiver = await startReceiver();
    inboundPort = await freePort();
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-what-happened-'));
    schema = backend === 'postgres' ? await postgresSchema() : undefined;
    server = await startServerProcess({
      DATA_DIR: dataDir,
      DATABASE_URL: schema?.url ?? '',
      SMTP_URL: sink.url,
      BOUNCE_DOMAIN,
      INBOUND_SMTP_PORT: String(inboundPort),
      WEBHOOK_ALLOW_PRIVATE: 'true',
    });
    const created = await api('POST', '/webhooks', {
      endpoint: receiver.url,
      events: ['email.sent', 'email.delivered', 'email.bounced', 'email.complained', 'email.suppressed'],
    });
    expect(created.status).toBe(201);
    const webhook = new Webhook(created.body.signing_secret);
    // Throws unless the signature, the id and the timestamp are the server's.
    verify = (body, headers) => webhook.verify(body, headers) as { type: string; data: Record<string, any> };
  });

  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await Promise.all([sink?.close(), receiver?.close()]);
    await schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('hears of a hard bounce by DSN: sent, then bounced (Permanent, with the diagnostic); the address is suppressed and the next email to it never reaches the relay', async () => {
    const address = 'gone@example.net';
    const id = await sendTo(address);
    expect(returnPathOf(id)).toMatch(new RegExp(`^bounces\\+${id}-[0-9a-f]{16}@${BOUNCE_DOMAIN.replaceAll('.', '\\.')}$`));
    await until(() => eventsFor(id).length >= 1, 'email.sent at the receiver');

    await mailToListener(dsn({ recipients: [{ address, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 <gone@example.net>: Recipient address rejected: User unknown' }] }), returnPathOf(id));
    await until(() => eventsFor(id).length >= 2, 'email.bounced at the receiver');
    const [sent, bounced] = eventsFor(id);
    expect(sent!.type).toBe('email.sent');
    expect(bounced!.type).toBe('email.bounced');
    expect(bounced!.data.bounce).toMatchObject({ type: 'Permanent', subType: 'NoEmail' });
    expect(bounced!.data.bounce.diagnosticCode.join(' ')).toContain('User unknown');
    expect((await api('GET', `/emails/${id}`)).body.last_event).toBe('bounced');
    expect((await api('GET', `/suppressions/${address}`)).body).toMatchObject({ email: address, origin: 'bounce', source_id: id });

    const relayed = sink.received.length;
    const { body } = await api('POST', '/emails', { from: 'Acme <team@acme.dev>', to: address, subject: 'Again', text: 'Hi again' });
    await until(async () => (await api('GET', `/emails/${body.id}`)).body.last_event === 'suppressed', 'the next email suppressed');
    await until(() => eventsFor(body.id).some((e) => e.type === 'email.suppressed'), 'email.suppressed at the receiver');
    expect(eventsFor(body.id).map((e) => e.type)).toEqual(['email.suppressed']);
    expect(sink.received.length).toBe(relayed);
  });

  it('hears of a complaint by ARF report: complained, and the address is suppressed', async () => {
    const address = 'annoyed@example.net';
    const id = await sendTo(address);
    await until(() => eventsFor(id).length >= 1, 'email.sent at the receiver');
    await mailToListener(arf({ emailId: id, rcptTo: address, to: address }), returnPathOf(id));
    await until(() => eventsFor(id).length >= 2, 'email.complained at the receiver');
    expect(eventsFor(id).map((e) => e.type)).toEqual(['email.sent', 'email.complained']);
    expect((await api('GET', `/suppressions/${address}`)).body).toMatchObject({ origin: 'complaint', source_id: id });

    const relayed = sink.received.length;
    const { body } = await api('POST', '/emails', { from: 'Acme <team@acme.dev>', to: address, subject: 'Again', text: 'Hi again' });
    await until(async () => (await api('GET', `/emails/${body.id}`)).body.last_event === 'suppressed', 'the next email suppressed');
    expect(sink.received.length).toBe(relayed);
  });

  it('hears of a success by DSN: sent, then delivered', async () => {
    const address = 'happy@example.net';
    const id = await sendTo(address);
    await mailToListener(dsn({ emailId: id, recipients: [{ address, action: 'delivered', status: '2.0.0', diagnostic: '250 2.0.0 Ok: queued as 4F1A2' }] }), returnPathOf(id));
    await until(() => eventsFor(id).length >= 2, 'email.delivered at the receiver');
    expect(eventsFor(id).map((e) => e.type)).toEqual(['email.sent', 'email.delivered']);
    expect((await api('GET', `/emails/${id}`)).body.last_event).toBe('delivered');
    expect((await api('GET', `/suppressions/${address}`)).status).toBe(404);
  });
});
