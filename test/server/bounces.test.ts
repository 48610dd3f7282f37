// Bounces and complaints end to end: messages leave through a real SMTP server on 127.0.0.1, each
// recipient's copy in a transaction of its own with its own signed return path and DSN parameters;
// delivery status notifications (RFC 3464) and complaint reports (ARF, RFC 5965), written here as raw
// RFC 5322 text the way an MTA writes them, are sent with nodemailer to the inbound listener, at the
// return path the sink received; the email's events, last_event and the suppression list follow.
// A relay's synchronous 5xx is a Permanent bounce too. Junk mail is accepted and changes nothing.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { createTransport } from 'nodemailer';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { returnPaths } from '../../server/delivery/returnPath.ts';
import { smtpTransport } from '../../server/delivery/transport.ts';
import { startInbound } from '../../server/inbound/listener.ts';
import { openStore } from '../../server/store/index.ts';
import { backends } from '../support/backends.ts';
import { deliverOnce } from '../support/delivery.ts';
import { freePort, startServerProcess } from '../support/process.ts';
import { arf, dsn, mailReport, withInbound } from '../support/reports.ts';
import { TEST_KEY, withServer } from '../support/server.ts';
import { startSmtpSink, withSink } from '../support/smtp.ts';
import { eventually } from './faults.ts';

const quiet = pino({ level: 'silent' });
const BOUNCE_DOMAIN = 'bounces.mailroom.test';

describe.each(backends)('bounces and complaints on %s', (backend) => {
  const server = withServer(backend);
  const sink = withSink();
  const inbound = withInbound(server);

  const report = (raw: string, to: string) => mailReport(inbound, raw, to);
  /** Sends one email through a worker with a bounce domain; returns its id once the relay took it. */
  async function sent(fields: Record<string, unknown>, bounceDomain: string | null = BOUNCE_DOMAIN): Promise<string> {
    const res = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'Acme <team@acme.dev>', subject: 'Hello', text: 'Hi', ...fields }) });
    expect(res.status).toBe(200);
    const { id } = await res.json();
    await deliverOnce(server, sink, { bounceDomain: bounceDomain ?? undefined });
    return id;
  }
  const email = async (id: string) => (await server.store.emails.find(id))!;
  const eventsOf = async (id: string) => (await server.store.events.forEmail(id)).map((e) => ({ type: e.type, data: e.data === null ? null : JSON.parse(e.data) }));
  const suppression = async (address: string) => (await server.request(`/suppressions/${encodeURIComponent(address)}`)).json();
  const received = (id: string) => sink.received.find((r) => r.mail.messageId === `<${id}@acme.dev>`)!;
  /** The return path `address`'s copy of the email went out with, as the relay received it. */
  const returnPathOf = (id: string, address: string) =>
    sink.received.find((r) => r.mail.messageId === `<${id}@acme.dev>` && r.envelope.to.some((to) => to.toLowerCase() === address.toLowerCase()))!.envelope.from;
  /** The events a send records itself (`email.sent`, or none before sends recorded events): bounces come after them. */
  const afterSend = async (id: string) => (await eventsOf(id)).length;

  it('sends each recipient its copy from a signed return path of its own, with DSN parameters on MAIL FROM and RCPT TO', async () => {
    const one = await sent({ to: `verp.${backend}@example.com` });
    const got = received(one);
    expect(got.envelope.from).toMatch(new RegExp(`^bounces\\+${one}-[0-9a-f]{16}@${BOUNCE_DOMAIN.replaceAll('.', '\\.')}$`));
    expect(got.envelope.from.split('@')[0]!.length).toBeLessThanOrEqual(64);
    expect(got.envelope.dsn).toMatchObject({ ret: 'HDRS', envid: one });
    expect(got.envelope.rcptDsn).toEqual([{ notify: ['FAILURE', 'DELAY'], orcpt: `rfc822;verp.${backend}@example.com` }]);
    expect(got.mail.from?.value[0]?.address).toBe('team@acme.dev');

    // Two recipients, two transactions: each with its own return path, and ORCPT naming it.
    const [a, b] = [`a.${backend}@example.com`, `b.${backend}@example.com`];
    const two = await sent({ to: [a, b] });
    const copies = sink.received.filter((r) => r.mail.messageId === `<${two}@acme.dev>`);
    expect(copies.map((r) => r.envelope.to).sort()).toEqual([[a], [b]]);
    expect(new Set(copies.map((r) => r.envelope.from)).size).toBe(2);
    for (const copy of copies) expect(copy.envelope.rcptDsn).toEqual([{ notify: ['FAILURE', 'DELAY'], orcpt: `rfc822;${copy.envelope.to[0]}` }]);
    expect(copies[0]!.raw).toBe(copies[1]!.raw);

    const plain = await sent({ to: `plain.${backend}@example.com` }, null);
    expect(received(plain).envelope.from).toBe('team@acme.dev');
    expect(received(plain).envelope.dsn?.envid ?? null).toBeNull();
  });

  it('records a Permanent bounce sent to the return path, suppresses the address, and records it once', async () => {
    const address = `Gone.${backend}@Example.com`;
    const id = await sent({ to: address });
    const before = await afterSend(id);
    const message = dsn({ recipients: [{ address: address.toLowerCase(), action: 'failed', status: '5.1.1', diagnostic: `550 5.1.1 <${address.toLowerCase()}>: Recipient address rejected: User unknown` }] });
    await report(message, returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('bounced');
    const events = await eventsOf(id);
    expect(events.slice(before)).toEqual([
      {
        type: 'email.bounced',
        data: {
          bounce: {
            type: 'Permanent',
            subType: 'NoEmail',
            message: expect.stringContaining('User unknown'),
            diagnosticCode: [`smtp; 550 5.1.1 <${address.toLowerCase()}>: Recipient address rejected: User unknown`],
          },
        },
      },
    ]);
    expect(await suppression(address)).toMatchObject({ object: 'suppression', email: address, origin: 'bounce', source_id: id });

    // The same DSN again (a sender that retried), then a Transient one: nothing new.
    await report(message, returnPathOf(id, address));
    await report(dsn({ emailId: id, recipients: [{ address, action: 'failed', status: '4.2.2' }] }), returnPathOf(id, address));
    expect(await eventsOf(id)).toHaveLength(events.length);
    const list = await (await server.request('/suppressions?origin=bounce')).json();
    expect(list.data.filter((s: { email: string }) => s.email.toLowerCase() === address.toLowerCase())).toHaveLength(1);
  });

  it('records a Transient bounce, and suppresses nothing', async () => {
    const address = `full.${backend}@example.com`;
    const id = await sent({ to: address });
    const before = await afterSend(id);
    await report(dsn({ envelopeId: id, recipients: [{ address, action: 'failed', status: '4.2.2', diagnostic: '452 4.2.2 Mailbox full' }] }), returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('bounced');
    expect((await eventsOf(id)).slice(before)).toEqual([
      { type: 'email.bounced', data: { bounce: { type: 'Transient', subType: 'MailboxFull', message: expect.any(String), diagnosticCode: ['smtp; 452 4.2.2 Mailbox full'] } } },
    ]);
    expect(await suppression(address)).toMatchObject({ name: 'not_found' });
  });

  it('records a delay without sending again, then the delivery', async () => {
    const address = `slow.${backend}@example.com`;
    const id = await sent({ to: address });
    const before = await afterSend(id);
    const copies = () => sink.received.filter((r) => r.mail.messageId === `<${id}@acme.dev>`).length;
    await report(dsn({ emailId: id, recipients: [{ address, action: 'delayed', status: '4.4.7', diagnostic: '421 4.4.7 Connection timed out' }] }), returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('delivery_delayed');
    // The relay holds the message and retries it: the outbox must not send it again.
    await deliverOnce(server, sink, { bounceDomain: BOUNCE_DOMAIN }, new Date(Date.now() + 24 * 3600_000));
    expect(copies()).toBe(1);
    await report(dsn({ emailId: id, recipients: [{ address, action: 'delivered', status: '2.0.0', diagnostic: '250 2.0.0 Ok: queued as 4A1B2C' }] }), returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('delivered');
    expect((await eventsOf(id)).slice(before)).toEqual([
      { type: 'email.delivery_delayed', data: { reason: 'smtp; 421 4.4.7 Connection timed out' } },
      { type: 'email.delivered', data: null },
    ]);
  });

  it('records a complaint sent to the return path, and suppresses the complainer', async () => {
    const address = `Angry.${backend}@example.com`;
    const id = await sent({ to: address });
    const before = await afterSend(id);
    await report(arf({ emailId: id, to: address }), returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('complained');
    expect((await eventsOf(id)).slice(before)).toEqual([{ type: 'email.complained', data: { complaint: { feedbackType: 'abuse' } } }]);
    expect(await suppression(address.toUpperCase())).toMatchObject({ email: address, origin: 'complaint', source_id: id });
    await report(arf({ emailId: id, to: address }), returnPathOf(id, address));
    expect(await eventsOf(id)).toHaveLength(before + 1);

    // Of an email to two, the one whose return path it reached; Original-Rcpt-To may name it, in any case.
    const other = `calm.${backend}@example.com`;
    const second = await sent({ to: [`cc.${backend}@example.com`, other] });
    await report(arf({ returnPath: returnPathOf(second, other), rcptTo: other.toUpperCase(), to: other }), returnPathOf(second, other));
    expect((await email(second)).last_event).toBe('complained');
    expect(await suppression(other)).toMatchObject({ origin: 'complaint', source_id: second });
    expect(await suppression(`cc.${backend}@example.com`)).toMatchObject({ name: 'not_found' });
  });

  it('bounces an email the relay refuses with a 5xx saying the mailbox is bad, suppressing its recipients', async () => {
    sink.refuse = () => ({ code: 550, text: '5.1.1 Mailbox unavailable' });
    try {
      const id = await sent({ to: [`refused.${backend}@example.com`, `Also.${backend}@example.com`] });
      expect((await email(id)).last_event).toBe('bounced');
      const [bounce] = await eventsOf(id);
      expect(bounce).toEqual({ type: 'email.bounced', data: { bounce: { type: 'Permanent', subType: 'NoEmail', message: expect.stringContaining('550'), diagnosticCode: [expect.stringMatching(/^smtp; 550/), expect.stringMatching(/^smtp; 550/)] } } });
      expect(await suppression(`refused.${backend}@example.com`)).toMatchObject({ origin: 'bounce', source_id: id });
      expect(await suppression(`also.${backend}@example.com`)).toMatchObject({ email: `Also.${backend}@example.com`, origin: 'bounce' });
    } finally {
      sink.refuse = () => undefined;
    }
  });

  it('keeps a report carrying a NUL, which PostgreSQL cannot store, with U+FFFD in its place', async () => {
    const address = `nul.${backend}@example.com`;
    const id = await sent({ to: address });
    const info = await report(dsn({ recipients: [{ address, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown\0' }] }), returnPathOf(id, address));
    expect(info.response).toMatch(/^250 /);
    expect(await email(id)).toMatchObject({ last_event: 'bounced', last_error: expect.stringContaining('User unknown\uFFFD') });
    expect((await eventsOf(id)).at(-1)!.data.bounce.diagnosticCode).toEqual(['smtp; 550 5.1.1 User unknown\uFFFD']);
    expect(await suppression(address)).toMatchObject({ origin: 'bounce', source_id: id });
  });

  it('records a Permanent bounce for a full mailbox without suppressing the address: a later email may get through', async () => {
    const address = `full.${backend}@example.com`;
    const id = await sent({ to: address });
    await report(dsn({ recipients: [{ address, action: 'failed', status: '5.2.2', diagnostic: '552 5.2.2 Mailbox full' }] }), returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('bounced');
    expect((await eventsOf(id)).at(-1)).toEqual({ type: 'email.bounced', data: { bounce: expect.objectContaining({ type: 'Permanent', subType: 'MailboxFull' }) } });
    expect(await suppression(address)).toMatchObject({ name: 'not_found' });
  });

  it('bounces, suppressing nobody, an email refused whole for its content, or with no word on the mailboxes', async () => {
    for (const [refusal, subType] of [[{ code: 554, text: '5.7.1 Message rejected as spam' }, 'ContentRejected'], [{ code: 550, text: 'Transaction failed' }, 'General']] as const) {
      sink.refuse = () => refusal;
      try {
        const [one, two] = [`innocent.${subType}.${backend}@example.com`, `other.${subType}.${backend}@example.com`];
        const id = await sent({ to: [one, two] });
        expect((await email(id)).last_event).toBe('bounced');
        expect(await eventsOf(id)).toEqual([{ type: 'email.bounced', data: { bounce: expect.objectContaining({ type: 'Permanent', subType }) } }]);
        for (const address of [one, two]) expect(await suppression(address), address).toMatchObject({ name: 'not_found' });
      } finally {
        sink.refuse = () => undefined;
      }
    }
  });

  it('sends to the recipients a relay takes, and bounces and suppresses the one it refuses at RCPT TO', async () => {
    const refused = `nouser.${backend}@example.com`;
    sink.refuseRecipient = (address) => (address === refused ? 550 : undefined);
    try {
      const id = await sent({ to: [refused, `fine.${backend}@example.com`] });
      expect(received(id).envelope.to).toEqual([`fine.${backend}@example.com`]);
      expect((await email(id)).last_event).toBe('bounced');
      const events = await eventsOf(id);
      expect(events.at(-1)).toEqual({ type: 'email.bounced', data: { bounce: expect.objectContaining({ type: 'Permanent', subType: 'NoEmail', diagnosticCode: [expect.stringContaining('5.1.1')] }) } });
      // Which of them it was: the event's `to` lists both.
      expect((events.at(-1) as { data: { bounce: { message: string } } }).data.bounce.message).toMatch(new RegExp(`^The receiving server refused the message for nouser\\.${backend}@example\\.com: 550`));
      expect(await suppression(refused)).toMatchObject({ origin: 'bounce', source_id: id });
      expect(await suppression(`fine.${backend}@example.com`)).toMatchObject({ name: 'not_found' });
    } finally {
      sink.refuseRecipient = () => undefined;
    }
  });

  describe('a recipient the relay defers (4xx) while it takes or refuses the others', () => {
    /** Makes the email due again and runs one more round, as its retry would. */
    async function retry(id: string): Promise<void> {
      await server.store.database.db.updateTable('emails').set({ next_attempt_at: new Date(0).toISOString() }).where('id', '=', id).execute();
      await deliverOnce(server, sink, { bounceDomain: BOUNCE_DOMAIN });
    }
    const envelopesOf = (id: string) => sink.received.filter((r) => r.mail.messageId === `<${id}@acme.dev>`).map((r) => r.envelope.to);

    it('is sent to the one the relay took and delayed for the deferred one alone: the retry goes to it, not again to the one who has it', async () => {
      const [busy, fine] = [`busy.${backend}@example.com`, `fine2.${backend}@example.com`];
      sink.refuseRecipient = (address) => (address === busy ? 451 : undefined);
      try {
        const id = await sent({ to: [fine, busy] });
        expect(envelopesOf(id)).toEqual([[fine]]);
        expect(await email(id)).toMatchObject({ last_event: 'delivery_delayed', message_id: `<${id}@acme.dev>`, last_error: expect.stringContaining(`the relay deferred ${busy}: 451`) });
        expect((await eventsOf(id)).map((e) => e.type)).toEqual(['email.sent', 'email.delivery_delayed']);
        sink.refuseRecipient = () => undefined;
        await retry(id);
        expect(envelopesOf(id)).toEqual([[fine], [busy]]);
        expect(received(id).mail.to).toMatchObject({ value: [{ address: fine }, { address: busy }] }); // the headers as written, both times
        expect((await email(id)).last_event).toBe('sent');
        expect((await eventsOf(id)).map((e) => e.type)).toEqual(['email.sent', 'email.delivery_delayed', 'email.sent']);
        expect(await suppression(busy)).toMatchObject({ name: 'not_found' });
      } finally {
        sink.refuseRecipient = () => undefined;
      }
    });

    it('with one recipient refused for good and one deferred, suppresses the first and retries only the second', async () => {
      for (const takesOne of [true, false]) {
        const [gone, busy, fine] = [`gone.${takesOne}.${backend}@example.com`, `busy.${takesOne}.${backend}@example.com`, `fine.${takesOne}.${backend}@example.com`];
        sink.refuseRecipient = (address) => (address === gone ? 550 : address === busy ? 451 : undefined);
        try {
          const id = await sent({ to: takesOne ? [gone, busy, fine] : [gone, busy] });
          expect(envelopesOf(id)).toEqual(takesOne ? [[fine]] : []);
          expect((await email(id)).last_event).toBe('delivery_delayed');
          // Sent when the relay took it for someone; the deferral and the refusal are recorded either way.
          expect((await eventsOf(id)).map((e) => e.type)).toEqual([...(takesOne ? ['email.sent'] : []), 'email.delivery_delayed', 'email.bounced']);
          expect(await suppression(gone)).toMatchObject({ origin: 'bounce', source_id: id });
          sink.refuseRecipient = () => undefined;
          await retry(id);
          expect(envelopesOf(id).at(-1)).toEqual([busy]);
          expect((await email(id)).last_event).toBe('sent');
        } finally {
          sink.refuseRecipient = () => undefined;
        }
      }
    });
  });

  it('changes nothing for a report that names anyone but the recipient of its return path, and still takes a later one about that recipient', async () => {
    const address = `kept.${backend}@example.com`;
    const id = await sent({ to: address });
    const events = await eventsOf(id);
    await report(dsn({ recipients: [{ address: `victim.${backend}@example.com`, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' }] }), returnPathOf(id, address));
    await report(arf({ emailId: id, rcptTo: `victim.${backend}@example.com`, to: `victim.${backend}@example.com` }), returnPathOf(id, address));
    // Naming the recipient and someone else is naming someone else.
    await report(dsn({ emailId: id, recipients: [{ address: `victim.${backend}@example.com`, action: 'failed', status: '5.1.1' }, { address: address.toUpperCase(), action: 'delivered', status: '2.0.0' }] }), returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('sent');
    expect(await eventsOf(id)).toEqual(events);
    expect(await suppression(address)).toMatchObject({ name: 'not_found' });
    expect(await suppression(`victim.${backend}@example.com`)).toMatchObject({ name: 'not_found' });

    await report(dsn({ emailId: id, recipients: [{ address: address.toUpperCase(), action: 'delivered', status: '2.0.0' }] }), returnPathOf(id, address));
    expect((await email(id)).last_event).toBe('delivered');
    expect((await eventsOf(id)).slice(events.length)).toEqual([{ type: 'email.delivered', data: null }]);
  });

  it('refuses for now (451) a notice of delay, delivery or complaint about an email not yet recorded as sent, and takes it once it is', async () => {
    const address = `early.${backend}@example.com`;
    const res = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'team@acme.dev', to: address, subject: 'Hi', text: 'Hi' }) });
    const { id } = await res.json();
    const notices = [
      arf({ emailId: id, to: address }),
      dsn({ emailId: id, recipients: [{ address, action: 'delivered', status: '2.0.0' }] }),
      dsn({ emailId: id, recipients: [{ address, action: 'delayed', status: '4.4.7' }] }),
    ];
    // Not sent yet, so not received: its return path is made here as the worker will make it.
    const path = (await returnPaths(server.store, undefined)).make(id, address, BOUNCE_DOMAIN);
    for (const notice of notices) await expect(report(notice, path)).rejects.toMatchObject({ responseCode: 451 });
    expect(await email(id)).toMatchObject({ last_event: 'queued' });
    expect(await eventsOf(id)).toEqual([]);

    await deliverOnce(server, sink, { bounceDomain: BOUNCE_DOMAIN });
    expect(returnPathOf(id, address)).toBe(path);
    expect((await report(notices[0]!, path)).response).toMatch(/^250 /);
    expect((await email(id)).last_event).toBe('complained');
    expect(await suppression(address)).toMatchObject({ origin: 'complaint', source_id: id });
  });

  it('lets one address hold four connections at most, so that idle ones cannot keep the relays out, and counts one that closed no more', async () => {
    const greeting = (localAddress: string) =>
      new Promise<{ socket: Socket; line: string }>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: inbound.port, localAddress });
        socket.once('data', (data) => resolve({ socket, line: data.toString('latin1') })).once('error', reject);
      });
    const idle = [];
    try {
      for (let i = 0; i < 4; i++) idle.push(await greeting('127.0.0.1'));
      expect(idle.map((c) => c.line.slice(0, 4))).toEqual(Array(4).fill('220 '));
      const over = await greeting('127.0.0.1');
      idle.push(over);
      expect(over.line).toMatch(/^421 .*Too many connections from 127\.0\.0\.1/);
      const elsewhere = await greeting('127.0.0.2');
      idle.push(elsewhere);
      expect(elsewhere.line).toMatch(/^220 /);
      // One of the four gone, its place is free again (and the refused one never took one).
      const gone = idle.shift()!;
      await new Promise((resolve) => gone.socket.once('close', resolve).destroy());
      await eventually(async () => {
        const again = await greeting('127.0.0.1');
        idle.push(again);
        return again.line.startsWith('220 ');
      }, 'a place freed');
    } finally {
      for (const { socket } of idle) socket.destroy();
    }
  });

  it('accepts junk and reports about nothing of ours, and changes nothing', async () => {
    const id = await sent({ to: `bystander.${backend}@example.com` });
    const events = await eventsOf(id);
    const suppressions = (await (await server.request('/suppressions')).json()).data.length;
    const junk = [
      'From: someone@example.net\r\nTo: bounces@acme.dev\r\nSubject: Out of office\r\n\r\nI am away until Monday.\r\n',
      dsn({ emailId: crypto.randomUUID(), recipients: [{ address: `bystander.${backend}@example.com`, action: 'failed', status: '5.1.1' }] }),
      dsn({ recipients: [{ address: `bystander.${backend}@example.com`, action: 'failed', status: '5.1.1' }] }),
      arf({ to: `bystander.${backend}@example.com` }),
      'Content-Type: multipart/report; report-type=delivery-status; boundary="x"\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nno status part\r\n--x--\r\n',
      `Content-Type: multipart/report; report-type=delivery-status; boundary="y"\r\n\r\n--y\r\nContent-Type: message/delivery-status\r\n\r\n${'\u0000garbage: \r\n'.repeat(50)}\r\n--y--\r\n`,
      '\u0000\u0001 not a message at all',
    ];
    for (const raw of junk) expect((await report(raw, 'bounces@acme.dev')).accepted).toEqual(['bounces@acme.dev']);
    // Addressed to a return path with a bad id, too, and mail that is no report to the email's own return path.
    expect((await report(junk[0]!, `bounces+not-an-id@${BOUNCE_DOMAIN}`)).accepted).toHaveLength(1);
    for (const raw of [junk[0]!, ...junk.slice(4)]) expect((await report(raw, returnPathOf(id, `bystander.${backend}@example.com`))).accepted).toHaveLength(1);
    expect(await eventsOf(id)).toEqual(events);
    expect((await (await server.request('/suppressions')).json()).data).toHaveLength(suppressions);
  });

  it('closes a connection that stays silent for the idle time', async () => {
    const short = await startInbound(server.store, quiet, { port: 0, host: '127.0.0.1', idleMs: 300 });
    try {
      const socket = connect({ host: '127.0.0.1', port: short.port });
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
      const opened = Date.now();
      socket.on('data', () => undefined).on('error', () => undefined);
      expect((await closed) - opened).toBeLessThan(5_000);
    } finally {
      await short.close();
    }
  });

  it('retries the whole email, to every recipient, when no transaction reached its recipient (the relay cannot be reached)', async () => {
    const closedPort = await freePort();
    const res = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'team@acme.dev', to: [`a.unreachable.${backend}@example.com`, `b.unreachable.${backend}@example.com`], subject: 'Hi', text: 'Hi' }) });
    const { id } = await res.json();
    await deliverOnce(server, () => smtpTransport(`smtp://127.0.0.1:${closedPort}`), { bounceDomain: BOUNCE_DOMAIN });
    const row = await server.store.database.db.selectFrom('emails').select(['last_event', 'last_error', 'deferred_recipients']).where('id', '=', id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ last_event: 'delivery_delayed', deferred_recipients: null, last_error: expect.stringContaining('ECONNREFUSED') });
    expect((await eventsOf(id)).map((e) => e.type)).toEqual(['email.delivery_delayed']);
  });

  it('refuses a message over the size limit with 552', async () => {
    const small = await startInbound(server.store, quiet, { port: 0, host: '127.0.0.1', maxBytes: 2000 });
    const transport = createTransport({ host: '127.0.0.1', port: small.port, secure: false, ignoreTLS: true });
    try {
      await expect(transport.sendMail({ envelope: { from: '', to: ['bounces@acme.dev'] }, raw: `Subject: big\r\n\r\n${'x'.repeat(5000)}\r\n` })).rejects.toMatchObject({ responseCode: 552 });
    } finally {
      transport.close();
      await small.close();
    }
  });
});

describe('a report the listener cannot record', () => {
  it('is refused for now with 451, so that the sender tries again, rather than taken and dropped', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-unrecordable-'));
    const store = await openStore({ dataDir });
    // A real database fault: the table every report is read against is gone.
    await sql`drop table emails`.execute(store.database.db);
    const inbound = await startInbound(store, quiet, { port: 0, host: '127.0.0.1' });
    const transport = createTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
    try {
      const raw = dsn({ emailId: crypto.randomUUID(), recipients: [{ address: 'gone@example.com', action: 'failed', status: '5.1.1' }] });
      await expect(transport.sendMail({ envelope: { from: '', to: [`bounces+${crypto.randomUUID()}-0123456789abcdef@${BOUNCE_DOMAIN}`] }, raw })).rejects.toMatchObject({ responseCode: 451 });
    } finally {
      transport.close();
      await inbound.close();
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('the built server', () => {
  it('runs the inbound listener beside its delivery thread: a bounce for an email it sent reaches the email and the suppression list', async () => {
    const sink = await startSmtpSink();
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-bounces-'));
    const inboundPort = await freePort();
    const server = await startServerProcess({ DATA_DIR: dataDir, SMTP_URL: sink.url, BOUNCE_DOMAIN, INBOUND_SMTP_PORT: String(inboundPort) });
    const api = (path: string, init: RequestInit = {}) => fetch(server.url + path, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' } });
    try {
      const { id } = await (await api('/emails', { method: 'POST', body: JSON.stringify({ from: 'team@acme.dev', to: 'nobody@example.com', subject: 'Hi', text: 'Hi' }) })).json();
      await sink.waitFor(1);
      const returnPath = sink.received[0]!.envelope.from;
      expect(returnPath).toMatch(new RegExp(`^bounces\\+${id}-[0-9a-f]{16}@`));
      const transport = createTransport({ host: '127.0.0.1', port: inboundPort, secure: false, ignoreTLS: true });
      await transport.sendMail({ envelope: { from: '', to: [returnPath] }, raw: dsn({ recipients: [{ address: 'nobody@example.com', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' }] }) });
      transport.close();
      await eventually(async () => (await (await api(`/emails/${id}`)).json()).last_event === 'bounced', 'the email bounced');
      expect(await (await api('/suppressions/nobody@example.com')).json()).toMatchObject({ origin: 'bounce', source_id: id });
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      await sink.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
