// Delivery through a real SMTP server on 127.0.0.1, parsed with mailparser; retries, failures, and
// two workers sharing one PostgreSQL outbox.
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smtpTransport } from '../../server/delivery/transport.ts';
import { DEFAULT_DELIVERY, DeliveryWorker, type DeliveryOptions } from '../../server/delivery/worker.ts';
import { openStore, type Store } from '../../server/store/index.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { startSmtpSink, type SmtpSink } from '../support/smtp.ts';

const quiet = pino({ level: 'silent' });
/** Every worker a test makes, stopped at the end so that pooled SMTP connections close. */
const made: DeliveryWorker[] = [];
const track = (w: DeliveryWorker) => (made.push(w), w);
const stopWorkers = () => Promise.all(made.splice(0).map((w) => w.stop()));
const fast: DeliveryOptions = { ...DEFAULT_DELIVERY, idleMs: 10, retryBaseMs: 10, maxAttempts: 3 };

describe.each(backends)('delivery on %s', (backend) => {
  let server: TestServer;
  let sink: SmtpSink;
  beforeAll(async () => {
    server = await startTestServer(backend);
    sink = await startSmtpSink();
  });
  afterAll(async () => {
    await stopWorkers();
    await sink.close();
    await server.close();
  });

  const send = async (body: unknown) => {
    const res = await server.request('/emails/batch', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return ((await res.json()).data as { id: string }[]).map((d) => d.id);
  };
  const lastEvent = async (id: string) => (await server.client.GET('/emails/{email_id}', { params: { path: { email_id: id } } })).data?.last_event;
  const worker = (options = fast) => track(new DeliveryWorker(server.store, smtpTransport(sink.url), quiet, options));

  it('delivers MIME with display names, cc, bcc in the envelope only, reply-to, custom headers, a generated text part, and no empty html part', async () => {
    await server.client.POST('/templates', { body: { name: 'Receipt', alias: `receipt-${backend}`, subject: 'Receipt {{{ORDER}}}', from: 'Shop <shop@acme.dev>', html: '<p>Order <b>{{{ORDER}}}</b> for {{{NAME|you}}}</p>' } });
    await server.client.POST('/templates/{template_id}/publish', { params: { path: { template_id: `receipt-${backend}` } } });
    const received = sink.received.length;
    const [plain, textOnly, templated, emptyHtml] = await send([
      {
        from: 'Acme Team <team@acme.dev>',
        to: ['Steve Wozniak <steve@example.com>', 'ada@example.com'],
        cc: 'audit@example.com',
        bcc: ['hidden@example.com'],
        reply_to: 'support@acme.dev',
        subject: 'Your order shipped',
        html: '<p>Track it <a href="https://acme.dev/track/1">here</a>.</p>',
        headers: { 'X-Entity-Ref-ID': 'order-8812' },
      },
      { from: 'team@acme.dev', to: 'plain@example.com', subject: 'Plain', text: 'Just text.' },
      { to: 'ann@example.com', template: { id: `receipt-${backend}`, variables: { ORDER: '42' } } },
      // An empty html part would be what mail clients show in place of the text.
      { from: 'team@acme.dev', to: 'empty@example.com', subject: 'Empty html', html: '', text: 'The text.' },
    ]);
    const w = worker();
    expect(await w.runOnce()).toBe(4);
    await sink.waitFor(received + 4);
    const byId = (id: string) => sink.received.find((r) => r.mail.messageId?.startsWith(`<${id}@`))!;

    const first = byId(plain!);
    expect(first.mail.from?.value).toEqual([{ name: 'Acme Team', address: 'team@acme.dev' }]);
    expect(first.mail.to).toMatchObject({ value: [{ name: 'Steve Wozniak', address: 'steve@example.com' }, { name: '', address: 'ada@example.com' }] });
    expect(first.mail.cc).toMatchObject({ value: [{ address: 'audit@example.com' }] });
    expect(first.mail.replyTo).toMatchObject({ value: [{ address: 'support@acme.dev' }] });
    expect(first.mail.headers.get('x-entity-ref-id')).toBe('order-8812');
    expect(first.raw).not.toMatch(/hidden@example\.com/);
    expect(first.envelope.to.sort()).toEqual(['ada@example.com', 'audit@example.com', 'hidden@example.com', 'steve@example.com']);
    expect(first.mail.html).toContain('<a href="https://acme.dev/track/1">here</a>');
    expect(first.mail.text?.trim()).toBe('Track it here [https://acme.dev/track/1].');
    expect(first.mail.messageId).toBe(`<${plain}@acme.dev>`);

    const second = byId(textOnly!);
    expect(second.mail.text?.trim()).toBe('Just text.');
    expect(second.mail.html).toBe(false);

    const fourth = byId(emptyHtml!);
    expect(fourth.mail.text?.trim()).toBe('The text.');
    expect(fourth.mail.html).toBe(false);
    expect(fourth.raw).not.toMatch(/text\/html/);

    const third = byId(templated!);
    expect(third.mail.subject).toBe('Receipt 42');
    expect(third.mail.from?.value[0]).toEqual({ name: 'Shop', address: 'shop@acme.dev' });
    expect(third.mail.html).toContain('Order <b>42</b> for you');

    // A relay took them: sent, not delivered (the relay is not the recipient).
    for (const id of [plain!, textOnly!, templated!]) expect(await lastEvent(id)).toBe('sent');
    const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: plain! } } });
    expect(data?.text).toBe('Track it here [https://acme.dev/track/1].');
  });

  it('retries a relay that refuses twice with 451, then delivers: delivery_delayed, then sent', async () => {
    let refusals = 0;
    sink.refuse = () => (refusals++ < 2 ? 451 : undefined);
    const [id] = await send([{ from: 'a@acme.dev', to: 'retry@example.com', subject: 'Retry', text: 'x' }]);
    const w = worker();
    const later = (s: number) => new Date(Date.now() + s * 1000);
    await w.runOnce();
    expect(await lastEvent(id!)).toBe('delivery_delayed');
    await w.runOnce(later(1));
    expect(await lastEvent(id!)).toBe('delivery_delayed');
    await w.runOnce(later(2));
    expect(await lastEvent(id!)).toBe('sent');
    expect(sink.received.filter((r) => r.mail.messageId?.startsWith(`<${id}@`))).toHaveLength(1);
    sink.refuse = () => undefined;
  });

  it('gives up on a relay that never answers a message within the transport timeout, and sends the email on retry', async () => {
    const hung = await startSmtpSink();
    hung.hang = (attempt) => attempt === 1;
    try {
      const [id] = await send([{ from: 'team@acme.dev', to: 'hung@example.com', subject: 'Hung', text: 'Once more.' }]);
      const w = track(new DeliveryWorker(server.store, smtpTransport(hung.url, { timeoutMs: 300 }), quiet, fast));
      const started = Date.now();
      expect(await w.runOnce()).toBe(1);
      // nodemailer's own default would have waited 10 minutes.
      expect(Date.now() - started).toBeLessThan(10_000);
      const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: id! } } });
      expect(data).toMatchObject({ last_event: 'delivery_delayed' });
      await new Promise((r) => setTimeout(r, 50));
      expect(await w.runOnce()).toBe(1);
      await hung.waitFor(1);
      expect(await lastEvent(id!)).toBe('sent');
    } finally {
      await hung.close();
    }
  });

  it('keeps its claim on a batch the relay is slow to take, so that another worker sends none of it again', async () => {
    const slow = await startSmtpSink({ delayMs: 300 });
    const tag = randomUUID();
    const ids = await send(Array.from({ length: 15 }, (_, n) => ({ from: 'a@acme.dev', to: `slow${n}@example.com`, subject: `${tag} ${n}`, text: 'x' })));
    // Three rounds of five connections at 300 ms or more each: longer than the lease, unless it is extended.
    const options = { ...fast, leaseMs: 900 };
    const first = track(new DeliveryWorker(server.store, smtpTransport(slow.url), quiet, options));
    const second = track(new DeliveryWorker(server.store, smtpTransport(slow.url), quiet, options));
    try {
      first.start();
      await new Promise((resolve) => setTimeout(resolve, 100));
      second.start();
      const deadline = Date.now() + 20_000;
      while ((await Promise.all(ids.map(lastEvent))).some((event) => event !== 'sent') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await Promise.all(ids.map(lastEvent))).toEqual(ids.map(() => 'sent'));
      await new Promise((resolve) => setTimeout(resolve, 500));
      const subjects = slow.received.map((r) => r.mail.subject).filter((subject) => subject?.startsWith(tag));
      expect(subjects).toHaveLength(15);
      expect(new Set(subjects).size).toBe(15);
    } finally {
      await Promise.all([first.stop(), second.stop()]);
      await slow.close();
    }
  });

  it('bounces at once on a permanent 550, without retrying', async () => {
    sink.refuse = () => 550;
    const [id] = await send([{ from: 'a@acme.dev', to: 'gone@example.com', subject: 'Gone', text: 'x' }]);
    await worker().runOnce();
    expect(await lastEvent(id!)).toBe('bounced');
    expect(await server.store.emails.find(id!)).toMatchObject({ attempts: 1 });
    sink.refuse = () => undefined;
  });

  it('gives up after the last attempt when the relay is down for good, keeping the email, and warns meanwhile', async () => {
    const down = await startSmtpSink();
    await down.close();
    const [id] = await send([{ from: 'a@acme.dev', to: 'down@example.com', subject: 'Down', text: 'x' }]);
    const lines: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const w = track(new DeliveryWorker(server.store, smtpTransport(down.url), logger, fast));
    for (let s = 0; s < fast.maxAttempts; s++) await w.runOnce(new Date(Date.now() + s * 1000));
    const stored = await server.store.emails.find(id!);
    expect(stored).toMatchObject({ last_event: 'failed', attempts: fast.maxAttempts, subject: 'Down' });
    expect(stored?.last_error).toMatch(/ECONNREFUSED|connect/i);
    // A relay that cannot be reached is the operator's to mend: a warning, not routine information.
    const delayed = lines.filter((line) => line.msg === 'delivery delayed');
    expect(delayed.length).toBe(fast.maxAttempts - 1);
    expect(delayed.every((line) => line.level === 40)).toBe(true);
  });

  it('on the last attempt, records the recipients the relay took as sent and those it refused as bounced before failing the ones it deferred', async () => {
    const lastTwice = { ...fast, maxAttempts: 2 };
    const suppression = async (address: string) => (await server.request(`/suppressions/${encodeURIComponent(address)}`)).json();
    for (const final of [false, true]) {
      const [fine, gone, busy] = ['fine', 'gone', 'busy'].map((who) => `${who}.last.${final}@example.com`);
      // The first attempt finds every recipient deferred; the last, one taken, one refused for good, one deferred again.
      let attempt = 0;
      sink.refuseRecipient = (address) => (attempt === 1 ? 451 : address === gone ? 550 : address === busy ? 451 : undefined);
      try {
        const [id] = await send([{ from: 'a@acme.dev', to: [fine, gone, busy], subject: 'Last', text: 'x' }]);
        const w = track(new DeliveryWorker(server.store, smtpTransport(sink.url, { final }), quiet, lastTwice));
        attempt = 1;
        await w.runOnce();
        expect(await lastEvent(id!)).toBe('delivery_delayed');
        attempt = 2;
        expect(await w.runOnce(new Date(Date.now() + 1000))).toBe(1);

        expect(sink.received.filter((r) => r.mail.messageId === `<${id}@acme.dev>`).map((r) => r.envelope.to)).toEqual([[fine]]);
        const stored = await server.store.emails.find(id!);
        expect(stored).toMatchObject({ last_event: 'failed', attempts: 2, message_id: `<${id}@acme.dev>` });
        expect(stored?.last_error).toContain(`the relay deferred ${busy}: 451`);
        const events = (await server.store.events.forEmail(id!)).map((e) => ({ type: e.type, data: e.data === null ? null : JSON.parse(e.data) }));
        expect(events.map((e) => e.type)).toEqual(['email.delivery_delayed', 'email.sent', ...(final ? ['email.delivered'] : []), 'email.bounced', 'email.failed']);
        expect(events.find((e) => e.type === 'email.bounced')?.data).toMatchObject({ bounce: { type: 'Permanent', subType: 'NoEmail', message: expect.stringContaining(gone) } });
        expect(events.at(-1)?.data).toEqual({ failed: { reason: stored?.last_error } });
        expect(await suppression(gone)).toMatchObject({ origin: 'bounce', source_id: id });
        for (const kept of [fine, busy]) expect(await suppression(kept)).toMatchObject({ name: 'not_found' });
      } finally {
        sink.refuseRecipient = () => undefined;
      }
    }
  });

  it('on the last attempt, suppresses the recipients the relay refused for good when it took none and deferred the others', async () => {
    const [gone, busy] = ['gone.none@example.com', 'busy.none@example.com'];
    sink.refuseRecipient = (address) => (address === gone ? 550 : address === busy ? 451 : undefined);
    try {
      const [id] = await send([{ from: 'a@acme.dev', to: [gone, busy], subject: 'None', text: 'x' }]);
      await worker({ ...fast, maxAttempts: 1 }).runOnce();
      expect(await server.store.emails.find(id!)).toMatchObject({ last_event: 'failed', message_id: null });
      expect((await server.store.events.forEmail(id!)).map((e) => e.type)).toEqual(['email.bounced', 'email.failed']);
      expect(await (await server.request(`/suppressions/${encodeURIComponent(gone)}`)).json()).toMatchObject({ origin: 'bounce', source_id: id });
      expect(await (await server.request(`/suppressions/${encodeURIComponent(busy)}`)).json()).toMatchObject({ name: 'not_found' });
    } finally {
      sink.refuseRecipient = () => undefined;
    }
  });

  // Last: its email stays due for another try, which the tests above would take up.
  it('says in words why TLS with the relay failed, without OpenSSL\'s codes and source path', async () => {
    const [id] = await send([{ from: 'a@acme.dev', to: 'tls@example.com', subject: 'TLS', text: 'x' }]);
    // smtps:// to a relay that speaks plain SMTP: OpenSSL reads its greeting as a TLS record.
    await track(new DeliveryWorker(server.store, smtpTransport(sink.url.replace('smtp://', 'smtps://')), quiet, fast)).runOnce();
    const stored = await server.store.emails.find(id!);
    expect(stored).toMatchObject({ last_event: 'delivery_delayed' });
    expect(stored?.last_error).toBe('TLS with the relay failed: wrong version number (smtps:// speaks TLS from the start, smtp:// upgrades with STARTTLS)');
  });
});

describe.skipIf(!backends.includes('postgres'))('two workers on PostgreSQL', () => {
  let server: TestServer;
  let sink: SmtpSink;
  const stores: Store[] = [];
  beforeAll(async () => {
    server = await startTestServer('postgres');
    sink = await startSmtpSink();
  });
  afterAll(async () => {
    await stopWorkers();
    for (const store of stores) await store.close();
    await sink.close();
    await server.close();
  });

  it('deliver 1,000 emails with no duplicate and no loss', async () => {
    const ids: string[] = [];
    for (let b = 0; b < 10; b++) {
      const items = Array.from({ length: 100 }, (_, n) => ({ from: 'a@acme.dev', to: `u${b * 100 + n}@example.com`, subject: `n${b * 100 + n}`, text: 'x' }));
      const res = await server.request('/emails/batch', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() }, body: JSON.stringify(items) });
      ids.push(...((await res.json()).data as { id: string }[]).map((d) => d.id));
    }
    const workers = [];
    for (let i = 0; i < 2; i++) {
      const store = await openStore({ databaseUrl: server.config.databaseUrl, dataDir: server.config.dataDir });
      stores.push(store);
      workers.push(track(new DeliveryWorker(store, smtpTransport(sink.url), quiet, { ...fast, batchSize: 50 })));
    }
    const handled = await Promise.all(
      workers.map(async (w) => {
        let count = 0;
        for (let n = await w.runOnce(); n > 0; n = await w.runOnce()) count += n;
        return count;
      }),
    );
    await sink.waitFor(1000);
    const messageIds = sink.received.map((r) => r.mail.messageId);
    expect(messageIds).toHaveLength(1000);
    expect(new Set(messageIds).size).toBe(1000);
    expect(handled[0]! + handled[1]!).toBe(1000);
    expect(Math.min(...handled)).toBeGreaterThan(0);
    const states = await server.store.database.db.selectFrom('emails').select('last_event').where('id', 'in', ids).execute();
    expect(states.every((s) => s.last_event === 'sent')).toBe(true);
  });
});
