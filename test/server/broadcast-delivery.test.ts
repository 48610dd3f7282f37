// A broadcast from end to end, as an operator runs Mailroom (the built server, its delivery thread, a
// real SMTP server on 127.0.0.1): 200 contacts, some unsubscribed, some only in another segment, some
// opted out of the broadcast's topic. Exactly the eligible ones receive one personalized message each,
// with RFC 8058 one-click unsubscribe headers; a one-click POST from a received message takes its
// reader off the topic, and the next broadcast skips them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends, postgresSchema } from '../support/backends.ts';
import { startServerProcess, type ServerProcess } from '../support/process.ts';
import { TEST_KEY } from '../support/server.ts';
import { startSmtpSink, type Received, type SmtpSink } from '../support/smtp.ts';

const CONTACTS = 200;
const inNewsletter = (i: number) => i < 160; // the rest are only in the other segment
const unsubscribed = (i: number) => i % 10 === 0;
const optedOut = (i: number) => i % 7 === 0;
const named = (i: number) => i % 3 !== 0;
const eligible = Array.from({ length: CONTACTS }, (_, i) => i).filter((i) => inNewsletter(i) && !unsubscribed(i) && !optedOut(i));
const address = (i: number) => `reader${i}@e2e.example`;

describe.each(backends)('a broadcast delivered on %s', (backend) => {
  let server: ServerProcess;
  let sink: SmtpSink;
  let dataDir: string;
  let schema: Awaited<ReturnType<typeof postgresSchema>> | undefined;
  const ids = new Map<number, string>();
  let newsletter: string;
  let topic: string;

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, {
      method,
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await res.json();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };

  beforeAll(async () => {
    sink = await startSmtpSink();
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-broadcast-'));
    schema = backend === 'postgres' ? await postgresSchema() : undefined;
    server = await startServerProcess({ DATA_DIR: dataDir, DATABASE_URL: schema?.url ?? '', SMTP_URL: sink.url });

    newsletter = (await api('POST', '/segments', { name: 'Newsletter' })).id;
    const other = (await api('POST', '/segments', { name: 'Other' })).id;
    topic = (await api('POST', '/topics', { name: 'Product news', default_subscription: 'opt_in' })).id;
    for (let i = 0; i < CONTACTS; i++) {
      const { id } = await api('POST', '/contacts', {
        email: address(i),
        ...(named(i) && { first_name: `Reader${i}` }),
        unsubscribed: unsubscribed(i),
        segments: [{ id: inNewsletter(i) ? newsletter : other }],
        ...(optedOut(i) && { topics: [{ id: topic, subscription: 'opt_out' }] }),
      });
      ids.set(i, id);
    }
  }, 120_000);

  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await sink?.close();
    await schema?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Sends a broadcast to the newsletter segment on the topic; resolves with what the sink received for it. */
  const broadcast = async (name: string, expected: number): Promise<Received[]> => {
    const before = sink.received.length;
    const { id } = await api('POST', '/broadcasts', {
      name,
      segment_id: newsletter,
      topic_id: topic,
      from: 'Acme News <news@acme.example>',
      subject: 'Hi {{{FIRST_NAME|there}}}',
      html: '<p>Hello {{{FIRST_NAME|there}}}, this went to {{{EMAIL}}}.</p><p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>',
      send: true,
    });
    await sink.waitFor(before + expected, 60_000);
    // Anything beyond the expected count would be a second copy or someone ineligible: give it time to show.
    const deadline = Date.now() + 30_000;
    while ((await api('GET', `/broadcasts/${id}`)).status !== 'sent') {
      if (Date.now() > deadline) throw new Error('the broadcast never reached `sent`');
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 1000));
    const got = sink.received.slice(before);
    expect(got).toHaveLength(expected);
    const sent = await api('GET', `/broadcasts/${id}`);
    expect(sent.sent_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    return got;
  };

  /** A header as it was written (mailparser folds List-* headers into objects of its own). */
  const header = (message: Received, name: string) => message.mail.headerLines.find((h) => h.key === name)?.line.replace(/\r?\n\s+/g, ' ');
  const unsubscribeUrl = (message: Received) => /<([^>]+)>/.exec(header(message, 'list-unsubscribe')!)![1];
  const topicChoice = async (i: number) =>
    ((await api('GET', `/contacts/${ids.get(i)}/topics`)).data as { id: string; subscription: string }[]).find((t) => t.id === topic)!.subscription;

  it('reaches every eligible contact once, personalized, with one-click unsubscribe headers', async () => {
    const got = await broadcast('First issue', eligible.length);
    const byRecipient = new Map(got.map((m) => [m.envelope.to.join(','), m]));
    expect([...byRecipient.keys()].sort()).toEqual(eligible.map(address).sort());
    for (const i of eligible) {
      const message = byRecipient.get(address(i))!;
      const name = named(i) ? `Reader${i}` : 'there';
      expect(message.mail.subject).toBe(`Hi ${name}`);
      expect(message.mail.html).toContain(`Hello ${name}, this went to ${address(i)}.`);
      expect(message.mail.text).toContain(`Hello ${name}`);
      expect(header(message, 'list-unsubscribe-post')).toBe('List-Unsubscribe-Post: List-Unsubscribe=One-Click');
      const url = unsubscribeUrl(message);
      expect(url.startsWith(`${server.url}/unsubscribe/`)).toBe(true);
      expect(message.mail.html).toContain(url.replace(/&/g, '&amp;'));
    }
    // The email log shows each subject as it was sent, as each email does, not the broadcast's placeholders.
    const listed: { to: string[]; subject: string }[] = [];
    for (let after: string | undefined; ; ) {
      const page = await api('GET', `/emails?limit=100${after ? `&after=${after}` : ''}`);
      listed.push(...page.data);
      if (!page.has_more) break;
      after = page.data.at(-1).id;
    }
    expect(listed).toHaveLength(eligible.length);
    for (const email of listed) {
      const i = Number(/reader(\d+)@/.exec(email.to[0]!)![1]);
      expect(email.subject, email.to[0]).toBe(`Hi ${named(i) ? `Reader${i}` : 'there'}`);
    }
  }, 120_000);

  it('takes a reader off the topic by one-click POST, not by GET, and the next broadcast skips them', async () => {
    const reader = eligible[1];
    const message = sink.received.find((m) => m.envelope.to[0] === address(reader))!;
    const url = unsubscribeUrl(message);

    const page = await fetch(url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toMatch(/<form[^>]+method="post"/i);
    expect(await topicChoice(reader)).toBe('opt_in');

    const oneClick = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(oneClick.status).toBe(200);
    expect(await topicChoice(reader)).toBe('opt_out');

    const got = await broadcast('Second issue', eligible.length - 1);
    const recipients = got.map((m) => m.envelope.to[0]);
    expect(recipients).not.toContain(address(reader));
    expect(new Set(recipients).size).toBe(eligible.length - 1);
  }, 120_000);
});
