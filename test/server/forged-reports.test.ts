// As a hostile recipient: someone who got an email (a Cc, or anyone it was forwarded to) tries to
// have another recipient suppressed, or the email marked bounced or complained, by mailing the inbound
// listener a DSN (RFC 3464) or an ARF report (RFC 5965) about that other recipient. Messages leave
// through a real SMTP server on 127.0.0.1, one transaction per recipient, each from a return path
// signed for that recipient; reports are mailed to the listener as MTAs write them.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { startInbound, type InboundListener } from '../../server/inbound/listener.ts';
import { backends } from '../support/backends.ts';
import { deliverOnce } from '../support/delivery.ts';
import { arf, dsn, mailReport, withInbound } from '../support/reports.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';

const quiet = pino({ level: 'silent' });
const BOUNCE_DOMAIN = 'bounces.mailroom.test';
const SIGNED_SINCE = 'return_paths_signed_since';

describe.each(backends)('as a hostile recipient, on %s', (backend) => {
  const server = withServer(backend);
  const sink = withSink();
  const inbound = withInbound(server);

  const report = (raw: string, to: string, listener = inbound) => mailReport(listener, raw, to);
  /** Sends one email through a worker with a bounce domain; returns its id once the relay took it. */
  async function sent(fields: Record<string, unknown>): Promise<string> {
    const res = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ from: 'Acme <team@acme.dev>', subject: 'Hello', text: 'Hi', ...fields }) });
    expect(res.status).toBe(200);
    const { id } = await res.json();
    await deliverOnce(server, sink, { bounceDomain: BOUNCE_DOMAIN });
    return id;
  }
  const copiesOf = (id: string) => sink.received.filter((r) => r.mail.messageId === `<${id}@acme.dev>`);
  /** The return path `address`'s copy went out with, as the relay received it. */
  const returnPathOf = (id: string, address: string) => copiesOf(id).find((r) => r.envelope.to.includes(address))!.envelope.from;
  const email = async (id: string) => (await server.store.emails.find(id))!;
  const eventTypes = async (id: string) => (await server.store.events.forEmail(id)).map((e) => e.type);
  const suppressed = async (address: string) => (await server.request(`/suppressions/${encodeURIComponent(address)}`)).status === 200;
  /** A DSN saying `address` does not exist, as its mail server would write it; with the email's Message-ID and envelope id, when given. */
  const unknownUser = (address: string, emailId?: string) =>
    dsn({ emailId, envelopeId: emailId, recipients: [{ address, action: 'failed', status: '5.1.1', diagnostic: `550 5.1.1 <${address}>: Recipient address rejected: User unknown` }] });

  it('sends an email to a To and a Cc as two transactions, from two different return paths, each signed for its recipient', async () => {
    const [to, cc] = [`to.paths.${backend}@example.com`, `cc.paths.${backend}@example.com`];
    const id = await sent({ to, cc });
    const copies = copiesOf(id);
    expect(copies.map((c) => c.envelope.to).sort()).toEqual([[cc], [to]]);
    const [toPath, ccPath] = [returnPathOf(id, to), returnPathOf(id, cc)];
    for (const path of [toPath, ccPath]) expect(path).toMatch(new RegExp(`^bounces\\+${id}-[0-9a-f]{16}@${BOUNCE_DOMAIN.replaceAll('.', '\\.')}$`));
    expect(toPath).not.toBe(ccPath);
    // Each copy carries both in its headers: only the envelope differs.
    for (const copy of copies) expect(copy.mail.cc).toMatchObject({ value: [{ address: cc }] });
  });

  it('lets a Cc bounce the To neither at its own return path, nor at an unsigned one, nor at postmaster; the To bounces itself at its own', async () => {
    const [to, cc] = [`to.dsn.${backend}@example.com`, `cc.dsn.${backend}@example.com`];
    const id = await sent({ to, cc });
    const before = await eventTypes(id);
    expect(before).toEqual(['email.sent']);
    for (const target of [returnPathOf(id, cc), `bounces+${id}@${BOUNCE_DOMAIN}`, 'postmaster@acme.dev']) {
      expect((await report(unknownUser(to, id), target)).accepted, target).toEqual([target]);
      expect((await email(id)).last_event, target).toBe('sent');
      expect(await suppressed(to), target).toBe(false);
      expect(await suppressed(cc), target).toBe(false);
      expect(await eventTypes(id), target).toEqual(before);
    }

    await report(unknownUser(to), returnPathOf(id, to));
    expect((await email(id)).last_event).toBe('bounced');
    expect(await eventTypes(id)).toEqual(['email.sent', 'email.bounced']);
    expect(await suppressed(to)).toBe(true);
    expect(await suppressed(cc)).toBe(false);
  });

  it('lets a Cc complain for the To neither at its own return path, nor at an unsigned one, nor at postmaster; the To complains at its own', async () => {
    const [to, cc] = [`to.arf.${backend}@example.com`, `cc.arf.${backend}@example.com`];
    const id = await sent({ to, cc });
    const forged = arf({ emailId: id, returnPath: `bounces+${id}@${BOUNCE_DOMAIN}`, rcptTo: to, to });
    for (const target of [returnPathOf(id, cc), `bounces+${id}@${BOUNCE_DOMAIN}`, 'postmaster@acme.dev']) {
      await report(forged, target);
      expect((await email(id)).last_event, target).toBe('sent');
      expect(await suppressed(to), target).toBe(false);
      expect(await suppressed(cc), target).toBe(false);
    }

    // The To's feedback loop, naming it or no one.
    await report(arf({ emailId: id, to }), returnPathOf(id, to));
    expect((await email(id)).last_event).toBe('complained');
    expect(await eventTypes(id)).toEqual(['email.sent', 'email.complained']);
    expect(await suppressed(to)).toBe(true);
    expect(await suppressed(cc)).toBe(false);
  });

  it('changes nothing for a tampered signature, or one made for another email, and takes the genuine one in any case', async () => {
    const address = `tampered.${backend}@example.com`;
    const id = await sent({ to: address });
    const other = await sent({ to: address.replace('tampered', 'other') });
    const genuine = returnPathOf(id, address);
    const tag = /-([0-9a-f]{16})@/.exec(genuine)![1]!;
    const flipped = genuine.replace(`-${tag}@`, `-${tag.slice(0, -1)}${tag.endsWith('0') ? '1' : '0'}@`);
    const borrowed = returnPathOf(other, address.replace('tampered', 'other')).replace(other, id);
    for (const target of [flipped, borrowed, genuine.replace(`-${tag}@`, '-@')]) {
      await report(unknownUser(address), target);
      expect((await email(id)).last_event, target).toBe('sent');
      expect(await suppressed(address), target).toBe(false);
    }
    // A relay may fold the local part's case.
    await report(unknownUser(address), genuine.toUpperCase());
    expect((await email(id)).last_event).toBe('bounced');
    expect(await suppressed(address)).toBe(true);
  });

  describe('an email sent before return paths were signed', () => {
    /** A listener started once the store says return paths were signed only from an hour from now: every email sent until then is older. */
    async function withOldEmails<T>(run: (listener: InboundListener) => Promise<T>): Promise<T> {
      const db = server.store.database.db;
      const { value } = await db.selectFrom('settings').select('value').where('name', '=', SIGNED_SINCE).executeTakeFirstOrThrow();
      await db.updateTable('settings').set({ value: new Date(Date.now() + 3600_000).toISOString() }).where('name', '=', SIGNED_SINCE).execute();
      const listener = await startInbound(server.store, quiet, { port: 0, host: '127.0.0.1' });
      try {
        return await run(listener);
      } finally {
        await listener.close();
        await db.updateTable('settings').set({ value }).where('name', '=', SIGNED_SINCE).execute();
      }
    }

    it('is still bounced at its unsigned return path when it had one recipient and the report names it, and only then', async () => {
      const alone = `alone.${backend}@example.com`;
      const one = await sent({ to: alone });
      const [to, cc] = [`to.old.${backend}@example.com`, `cc.old.${backend}@example.com`];
      const two = await sent({ to, cc });
      // To the listener that knows the email is newer than signing: nothing.
      await report(unknownUser(alone), `bounces+${one}@${BOUNCE_DOMAIN}`);
      expect((await email(one)).last_event).toBe('sent');

      await withOldEmails(async (listener) => {
        await report(unknownUser(to), `bounces+${two}@${BOUNCE_DOMAIN}`, listener);
        expect((await email(two)).last_event).toBe('sent');
        expect(await suppressed(to)).toBe(false);
        await report(unknownUser(`someone.else.${backend}@example.com`), `bounces+${one}@${BOUNCE_DOMAIN}`, listener);
        expect((await email(one)).last_event).toBe('sent');

        await report(unknownUser(alone), `bounces+${one}@${BOUNCE_DOMAIN}`, listener);
        expect((await email(one)).last_event).toBe('bounced');
        expect(await suppressed(alone)).toBe(true);
      });
    });

    it('is still complained of at its unsigned return path when it had one recipient, and not when it had two', async () => {
      const alone = `alone.arf.${backend}@example.com`;
      const one = await sent({ to: alone });
      const [to, cc] = [`to.old.arf.${backend}@example.com`, `cc.old.arf.${backend}@example.com`];
      const two = await sent({ to, cc });
      await withOldEmails(async (listener) => {
        await report(arf({ rcptTo: to, to }), `bounces+${two}@${BOUNCE_DOMAIN}`, listener);
        expect((await email(two)).last_event).toBe('sent');
        expect(await suppressed(to)).toBe(false);

        await report(arf({ to: alone }), `bounces+${one}@${BOUNCE_DOMAIN}`, listener);
        expect((await email(one)).last_event).toBe('complained');
        expect(await suppressed(alone)).toBe(true);
      });
    });
  });
});
