// A broadcast's emails delivered through a real SMTP server: personalized for each contact, with the
// one-click unsubscribe headers (RFC 8058) pointing under PUBLIC_URL; the unsubscribe pages those
// links lead to; signed tokens that cannot be forged or altered, under a secret every process sharing
// the store agrees on, across restarts; emails withdrawn when the contact left first; and the
// personalized email read back. On SQLite and PostgreSQL. Outbox rows are written as the fan-out
// writes them.
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { defaultPublicUrl, unsubscribeTokens } from '../../server/broadcasts/unsubscribeToken.ts';
import { loadConfig, warnOfPlainHttp } from '../../server/config.ts';
import { startServer } from '../../server/server.ts';
import { openStore } from '../../server/store/index.ts';
import { backends, postgresSchema } from '../support/backends.ts';
import { withWorker } from '../support/delivery.ts';
import { startServerProcess } from '../support/process.ts';
import { withServer } from '../support/server.ts';
import { withSink, type Received } from '../support/smtp.ts';

const PUBLIC_URL = 'https://mail.acme.test/mailroom';
const quiet = pino({ level: 'silent' });
const CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'";

describe.each(backends)('broadcast emails and one-click unsubscribe on %s', (backend) => {
  const server = withServer(backend, { config: { publicUrl: PUBLIC_URL } });
  const sink = withSink();
  const worker = withWorker(server, sink, { idleMs: 10, serverLinks: true });
  const now = () => new Date().toISOString();
  const db = () => server.store.database.db;

  async function contact(email: string, fields: { first_name?: string; last_name?: string; properties?: Record<string, string>; unsubscribed?: number } = {}) {
    const id = randomUUID();
    const at = now();
    await db().insertInto('contacts').values({ id, email, email_key: email.toLowerCase(), first_name: fields.first_name ?? null, last_name: fields.last_name ?? null, unsubscribed: fields.unsubscribed ?? 0, properties: JSON.stringify(fields.properties ?? {}), created_at: at, updated_at: at }).execute();
    return id;
  }

  async function topic(name: string, default_subscription: 'opt_in' | 'opt_out' = 'opt_in') {
    const id = randomUUID();
    await db().insertInto('topics').values({ id, name, description: null, default_subscription, visibility: 'public', created_at: now() }).execute();
    return id;
  }

  async function broadcast(topicId: string | null, content: { subject: string; html: string | null; text: string | null }) {
    const id = randomUUID();
    await db().insertInto('broadcasts').values({ id, name: 'b', segment_id: randomUUID(), from_address: 'Acme <news@acme.dev>', reply_to: JSON.stringify(['support@acme.dev']), preview_text: null, status: 'sent', topic_id: topicId, created_at: now(), scheduled_at: null, sent_at: now(), ...content }).execute();
    return id;
  }

  /** The outbox row the fan-out writes for one recipient, a member of the broadcast's segment. */
  async function outbox(broadcastId: string, contactId: string, email: string) {
    const id = randomUUID();
    const b = await db().selectFrom('broadcasts').selectAll().where('id', '=', broadcastId).executeTakeFirstOrThrow();
    const at = now();
    await db().insertInto('segment_contacts').values({ segment_id: b.segment_id, contact_id: contactId, contact_created_at: at, created_at: at }).execute();
    await db().insertInto('emails').values({ id, from_address: b.from_address, to_addresses: JSON.stringify([email]), cc: null, bcc: null, reply_to: b.reply_to, subject: b.subject, html: null, text: null, headers: null, tags: null, last_event: 'queued', attempts: 0, next_attempt_at: at, message_id: null, last_error: null, created_at: at, updated_at: at, broadcast_id: broadcastId, contact_id: contactId }).execute();
    return id;
  }

  const received = (emailId: string): Received | undefined => sink.received.find((r) => r.mail.messageId?.startsWith(`<${emailId}@`));
  /** The unsubscribe URL of a received message, and the same path on this test server. */
  const linkOf = (message: Received) => {
    const head = message.raw.slice(0, message.raw.indexOf('\r\n\r\n')).replace(/\r\n[ \t]+/g, ' ');
    const url = /^List-Unsubscribe: <([^>]+)>$/im.exec(head)![1]!;
    expect(url.startsWith(`${PUBLIC_URL}/unsubscribe/`), url).toBe(true);
    return { url, local: server.url + url.slice(PUBLIC_URL.length) };
  };
  const form = (local: string, body: BodyInit | undefined = 'List-Unsubscribe=One-Click', type: string | undefined = 'application/x-www-form-urlencoded') =>
    fetch(local, { method: 'POST', headers: type ? { 'content-type': type } : {}, body });
  const stored = (id: string) => db().selectFrom('contacts').select(['unsubscribed']).where('id', '=', id).executeTakeFirstOrThrow();
  const choice = (contactId: string, topicId: string) =>
    db().selectFrom('contact_topics').select('subscription').where('contact_id', '=', contactId).where('topic_id', '=', topicId).executeTakeFirst().then((r) => r?.subscription);

  let steve: string, anon: string, productTopic: string, everything: { email: string; contact: string }[], topical: { email: string; contact: string }[];

  it('delivers one personalized message per outbox row, with both unsubscribe headers under PUBLIC_URL', async () => {
    steve = await contact(`steve-${backend}@example.com`, { first_name: 'Steve', last_name: 'Wozniak', properties: { plan: 'pro' } });
    anon = await contact(`anon-${backend}@example.com`);
    productTopic = await topic('Product <updates>');
    const all = await broadcast(null, {
      subject: 'Hi {{{FIRST_NAME|there}}}',
      html: '<h1>Hello {{{contact.first_name|friend}}}</h1><p>Your plan: {{{plan|free}}}.</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>',
      text: null,
    });
    const news = await broadcast(productTopic, { subject: 'News for {{{EMAIL}}}', html: null, text: 'Dear {{{FIRST_NAME}}} {{{LAST_NAME|}}},\nleave: {{{RESEND_UNSUBSCRIBE_URL}}}' });
    everything = [
      { email: await outbox(all, steve, `steve-${backend}@example.com`), contact: steve },
      { email: await outbox(all, anon, `anon-${backend}@example.com`), contact: anon },
    ];
    topical = [
      { email: await outbox(news, steve, `steve-${backend}@example.com`), contact: steve },
      { email: await outbox(news, anon, `anon-${backend}@example.com`), contact: anon },
    ];
    const before = sink.received.length;
    expect(await worker.runOnce()).toBe(4);
    await sink.waitFor(before + 4);
    expect(sink.received.length).toBe(before + 4);

    const toSteve = received(everything[0]!.email)!;
    expect(toSteve.mail.subject).toBe('Hi Steve');
    expect(toSteve.envelope.to).toEqual([`steve-${backend}@example.com`]);
    expect(toSteve.mail.html).toContain('<h1>Hello Steve</h1><p>Your plan: pro.</p>');
    expect(toSteve.raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m);
    const { url } = linkOf(toSteve);
    expect(toSteve.mail.html).toContain(`<a href="${url}">Unsubscribe</a>`);
    expect(toSteve.mail.text).toContain(`Hello Steve`);
    expect(toSteve.mail.text).toContain(`Unsubscribe [${url}]`);

    const toAnon = received(everything[1]!.email)!;
    expect(toAnon.mail.subject).toBe('Hi there');
    expect(toAnon.mail.html).toContain('<h1>Hello friend</h1><p>Your plan: free.</p>');
    expect(linkOf(toAnon).url).not.toBe(url);

    const newsToAnon = received(topical[1]!.email)!;
    expect(newsToAnon.mail.subject).toBe(`News for anon-${backend}@example.com`);
    expect(newsToAnon.mail.text?.trim()).toBe(`Dear  ,\nleave: ${linkOf(newsToAnon).url}`);
    expect(newsToAnon.mail.html).toBe(false);
    expect(received(topical[0]!.email)!.mail.text).toContain('Dear Steve Wozniak,');
    for (const { email } of [...everything, ...topical]) expect((await server.store.emails.find(email))?.last_event).toBe('sent');
  });

  it('GET on the link shows a page with a form and changes nothing', async () => {
    const { local } = linkOf(received(topical[0]!.email)!);
    for (let i = 0; i < 2; i++) {
      const res = await fetch(local);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('content-security-policy')).toBe(CSP);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      const page = await res.text();
      expect(page).toContain('Product &lt;updates&gt;');
      expect(page).toMatch(/<form method="post" autocomplete="off"><input type="hidden" name="List-Unsubscribe" value="One-Click">/);
      expect(page).not.toMatch(/<(script|img|link)\b|https?:/);
    }
    const everythingPage = await (await fetch(linkOf(received(everything[0]!.email)!).local)).text();
    expect(everythingPage).toContain('all our emails');
    // Parameters a link tracker or a mail client appends change nothing: the token says who and what.
    const tracked = await fetch(`${local}?utm_source=newsletter&utm_medium=email`, { headers: { accept: 'text/html' } });
    expect(tracked.status).toBe(200);
    expect(await tracked.text()).toContain('Product &lt;updates&gt;');
    expect(await stored(steve)).toEqual({ unsubscribed: 0 });
    expect(await choice(steve, productTopic)).toBeUndefined();
    // The request log keeps the path, never the token, which unsubscribes whoever holds it.
    const token = local.slice(local.lastIndexOf('/') + 1);
    expect(server.logs.some((line) => line.url === '/unsubscribe/…')).toBe(true);
    expect(JSON.stringify(server.logs)).not.toContain(token);
  });

  it('POST List-Unsubscribe=One-Click on a topic link opts the contact out of that topic only, and again is harmless', async () => {
    const { local } = linkOf(received(topical[0]!.email)!);
    for (let i = 0; i < 2; i++) {
      const res = await form(local);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-security-policy')).toBe(CSP);
      expect(await res.text()).toContain('You are unsubscribed from <strong>Product &lt;updates&gt;</strong>');
    }
    expect(await choice(steve, productTopic)).toBe('opt_out');
    expect(await stored(steve)).toEqual({ unsubscribed: 0 });
  });

  it('POST on a link without a topic unsubscribes the contact from everything, whichever way the form comes', async () => {
    const { local } = linkOf(received(everything[0]!.email)!);
    const res = await form(local);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('all our emails');
    expect(await stored(steve)).toEqual({ unsubscribed: 1 });
    await db().updateTable('contacts').set({ unsubscribed: 0 }).where('id', '=', steve).execute();

    const multipart = new FormData();
    multipart.set('List-Unsubscribe', 'One-Click');
    expect((await fetch(local, { method: 'POST', body: multipart })).status).toBe(200);
    expect(await stored(steve)).toEqual({ unsubscribed: 1 });
    expect((await form(local, undefined, undefined)).status).toBe(200);

    const json = await form(local, '{}', 'application/json');
    expect(json.status).toBe(415);
    expect(await json.json()).toMatchObject({ statusCode: 415, name: 'unsupported_media_type' });
    expect((await form(local, 'List-Unsubscribe=Later')).status).toBe(422);
    const broken = await form(local, '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\nb', 'multipart/form-data; boundary=x');
    expect(broken.status).toBe(422);
    const file = new FormData();
    file.set('upload', new Blob(['x'.repeat(100_000)]), 'big.bin');
    expect((await fetch(local, { method: 'POST', body: file })).status).toBe(413);

    // Refusals of the form as a whole say so, in its own terms: not "too large" for 21 short fields,
    // not the token named as a field, not JSON's charsets.
    const refusal = async (res: Response) => ({ status: res.status, body: await res.json() });
    const tooMany = { status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The form is refused: too many fields.' } };
    const fields = Array.from({ length: 21 }, (_, i) => [`f${i}`, '1']);
    expect(await refusal(await form(local, new URLSearchParams(fields).toString()))).toEqual(tooMany);
    const many = new FormData();
    for (const [name, value] of fields) many.set(name!, value!);
    expect(await refusal(await fetch(local, { method: 'POST', body: many }))).toEqual(tooMany);
    expect(await refusal(await form(local, '', 'multipart/form-data'))).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The body is not a well-formed multipart/form-data form.' } });
    expect(await refusal(await form(local, undefined, 'application/x-www-form-urlencoded; charset=latin1'))).toEqual({
      status: 415,
      body: { statusCode: 415, name: 'unsupported_media_type', message: 'The form must be in UTF-8 or ISO-8859-1, not `latin1`.' },
    });
  });

  it('answers 404 for a forged or altered token, and for a contact that is gone; 422 for one far too long', async () => {
    const { local } = linkOf(received(topical[1]!.email)!);
    const token = local.slice(local.lastIndexOf('/') + 1);
    const base = local.slice(0, local.lastIndexOf('/') + 1);
    const bytes = Buffer.from(token, 'base64url');
    const flipped = (at: number) => {
      const copy = Buffer.from(bytes);
      copy[at]! ^= 1;
      return copy.toString('base64url');
    };
    // Another contact (steve's id in anon's token), another topic, another scope, another MAC; garbage.
    const swapped = Buffer.concat([bytes.subarray(0, 1), Buffer.from(steve.replaceAll('-', ''), 'hex'), bytes.subarray(17)]).toString('base64url');
    const forged = [flipped(0), flipped(5), flipped(20), flipped(bytes.length - 1), swapped, token.slice(0, -1), `${token}A`, 'garbage', 'A'.repeat(87), '..', '%00x', `${token}%3D`];
    for (const bad of forged) {
      for (const method of ['GET', 'POST']) {
        const res = await fetch(base + bad, { method });
        expect(res.status, `${method} ${bad}`).toBe(bad === '%00x' ? 422 : 404);
        expect(await res.json()).toMatchObject({ statusCode: res.status, name: bad === '%00x' ? 'invalid_parameter' : 'not_found' });
      }
    }
    expect((await fetch(base + 'A'.repeat(300))).status).toBe(422);
    expect(await choice(anon, productTopic)).toBeUndefined();

    // The contact deleted: its links lead nowhere.
    const gone = await contact(`gone-${backend}@example.com`);
    const goneLink = `${server.url}/unsubscribe/${server.links.tokens.sign({ contactId: gone, scope: 'topic', id: productTopic })}`;
    expect((await fetch(goneLink)).status).toBe(200);
    await db().deleteFrom('contacts').where('id', '=', gone).execute();
    expect((await fetch(goneLink)).status).toBe(404);
    expect((await form(goneLink)).status).toBe(404);
    expect(await choice(gone, productTopic)).toBeUndefined();
  });

  it('cancels, sending nothing, an email whose contact unsubscribed, left the topic or the segment, was deleted or changed its address before delivery', async () => {
    const fresh = await contact(`late-${backend}@example.com`, { first_name: 'Late' });
    const moved = await contact(`moved-${backend}@example.com`);
    const optedOut = await contact(`optout-${backend}@example.com`);
    const left = await contact(`left-${backend}@example.com`);
    const deleted = await contact(`deleted-${backend}@example.com`);
    const stays = await contact(`stays-${backend}@example.com`);
    const b = await broadcast(null, { subject: 'Hello', html: '<p>x</p>', text: null });
    const t = await broadcast(productTopic, { subject: 'Topic', html: null, text: 'y' });
    const ids = {
      unsubscribed: await outbox(b, fresh, `late-${backend}@example.com`),
      optedOut: await outbox(t, optedOut, `optout-${backend}@example.com`),
      left: await outbox(b, left, `left-${backend}@example.com`),
      deleted: await outbox(b, deleted, `deleted-${backend}@example.com`),
      stays: await outbox(t, stays, `stays-${backend}@example.com`),
      moved: await outbox(b, moved, `moved-${backend}@example.com`),
    };
    // Its old address, which someone else may take, must not get a message made for its new one.
    expect((await server.client.PATCH('/contacts/{contact_id}', { params: { path: { contact_id: moved } }, body: { email: `elsewhere-${backend}@example.com` } })).response.status).toBe(200);
    await db().updateTable('contacts').set({ unsubscribed: 1 }).where('id', '=', fresh).execute();
    await db().insertInto('contact_topics').values({ contact_id: optedOut, topic_id: productTopic, subscription: 'opt_out', updated_at: now() }).execute();
    await db().deleteFrom('segment_contacts').where('contact_id', '=', left).execute();
    await db().deleteFrom('contacts').where('id', '=', deleted).execute();
    const before = sink.received.length;
    // The round ends once each of the six is sent or withdrawn, and the sink has what it took by then.
    expect(await worker.runOnce()).toBe(6);
    expect(sink.received.length).toBe(before + 1);
    expect(received(ids.stays)).toBeDefined();
    for (const [what, id] of Object.entries(ids)) {
      const email = await server.store.emails.find(id);
      if (what === 'stays') expect(email?.last_event).toBe('sent');
      else {
        expect(email?.last_event, what).toBe('canceled');
        expect(email?.last_error, what).toMatch({ optedOut: /topic/, left: /segment/, deleted: /deleted/, unsubscribed: /unsubscribed/, moved: /address changed/ }[what]!);
      }
    }
    const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: ids.unsubscribed } } });
    expect(data?.last_event).toBe('canceled');
  });

  it('GET /emails/{id} shows the personalized content and broadcast_id; fallbacks once the contact is gone', async () => {
    const row = await server.store.emails.find(everything[0]!.email);
    const { data, response } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: everything[0]!.email } } });
    expect(response.status).toBe(200);
    const { url } = linkOf(received(everything[0]!.email)!);
    expect(data).toMatchObject({ broadcast_id: row!.broadcast_id, subject: 'Hi Steve', to: [`steve-${backend}@example.com`] });
    expect(data?.html).toContain(`<h1>Hello Steve</h1><p>Your plan: pro.</p><a href="${url}">`);
    expect(data?.text).toContain(`Unsubscribe [${url}]`);
    // The outbox row itself kept no copy of the body.
    expect(row).toMatchObject({ html: null, text: null });

    await db().deleteFrom('contacts').where('id', '=', anon).execute();
    const gone = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: everything[1]!.email } } });
    expect(gone.data).toMatchObject({ subject: 'Hi there', broadcast_id: row!.broadcast_id });
    expect(gone.data?.html).toContain('<h1>Hello friend</h1>');

    const sent = await server.client.POST('/emails', { body: { from: 'a@acme.dev', to: 'b@example.com', subject: 'Own', text: 'x' } });
    const own = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: sent.data!.id } } });
    expect(own.data).toMatchObject({ broadcast_id: null, subject: 'Own', text: 'x' });
  });

  it('keeps the secret: another server on the same store, and one started after a restart, accept an old link', async () => {
    const { local } = linkOf(received(topical[0]!.email)!);
    const path = local.slice(server.url.length);
    // A second server on the same database, then a restart of it: the secret came from the store.
    for (let round = 0; round < 2; round++) {
      const other = await startServer({ ...server.config, port: 0 }, { logger: quiet });
      try {
        expect((await fetch(other.url + path)).status).toBe(200);
      } finally {
        await other.close();
      }
    }
    // And a process of its own, as `npm start` runs.
    const child = await startServerProcess({ DELIVERY_WORKER: 'off', DATA_DIR: server.config.dataDir, DATABASE_URL: server.config.databaseUrl ?? '' });
    try {
      expect((await fetch(child.url + path)).status).toBe(200);
    } finally {
      child.child.kill('SIGTERM');
      await child.exited;
    }
  });
});

describe.each(backends)('the unsubscribe secret on %s', (backend) => {
  it('processes starting together on a fresh store agree on one generated secret; UNSUBSCRIBE_SECRET overrides it', async () => {
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-secret-'));
    const schema = backend === 'postgres' ? await postgresSchema() : undefined;
    const first = await openStore({ dataDir, databaseUrl: schema?.url });
    const stores = [first, ...(await Promise.all(Array.from({ length: 3 }, () => openStore({ dataDir, databaseUrl: schema?.url }))))];
    try {
      const target = { contactId: randomUUID(), scope: 'broadcast' as const, id: randomUUID() };
      const signed = (await Promise.all(stores.map((store) => unsubscribeTokens(store, undefined)))).map((tokens) => tokens.sign(target));
      expect(new Set(signed).size).toBe(1);
      const configured = await unsubscribeTokens(first, 'x'.repeat(32));
      expect(configured.sign(target)).not.toBe(signed[0]);
      expect(configured.verify(signed[0]!)).toBeUndefined();
      expect(configured.verify(configured.sign(target))).toEqual(target);
    } finally {
      for (const store of stores) await store.close();
      await schema?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('PUBLIC_URL and UNSUBSCRIBE_SECRET', () => {
  it('takes an absolute http(s) URL, trailing slashes dropped; refuses a query, a fragment, credentials or another scheme', () => {
    expect(loadConfig({ PUBLIC_URL: 'https://mail.acme.dev/' }).publicUrl).toBe('https://mail.acme.dev');
    expect(loadConfig({ PUBLIC_URL: 'http://10.0.0.5:8080/mailroom//' }).publicUrl).toBe('http://10.0.0.5:8080/mailroom');
    expect(loadConfig({}).publicUrl).toBeUndefined();
    for (const bad of ['mail.acme.dev', '/unsubscribe', 'ftp://acme.dev', 'https://acme.dev/?a=1', 'https://acme.dev/#x', 'https://u:p@acme.dev', 'javascript:alert(1)']) {
      expect(() => loadConfig({ PUBLIC_URL: bad }), bad).toThrow(/PUBLIC_URL must be an absolute http:\/\/ or https:\/\/ URL/);
    }
  });

  it('wants a secret of at least 32 characters, and never echoes it', () => {
    expect(loadConfig({ UNSUBSCRIBE_SECRET: 's'.repeat(32) }).unsubscribeSecret).toBe('s'.repeat(32));
    expect(() => loadConfig({ UNSUBSCRIBE_SECRET: 'short-secret' })).toThrow(/UNSUBSCRIBE_SECRET must be at least 32 characters$/);
    expect(() => loadConfig({ UNSUBSCRIBE_SECRET: 'short-secret' })).not.toThrow(/short-secret/);
  });

  it("defaults to the server's own URL, a wildcard address reached on loopback", () => {
    expect(defaultPublicUrl('127.0.0.1', 3000)).toBe('http://127.0.0.1:3000');
    expect(defaultPublicUrl('0.0.0.0', 8080)).toBe('http://127.0.0.1:8080');
    expect(defaultPublicUrl('::', 8080)).toBe('http://127.0.0.1:8080');
    expect(defaultPublicUrl('::1', 8080)).toBe('http://[::1]:8080');
    expect(defaultPublicUrl('mail.internal', 80)).toBe('http://mail.internal:80');
  });

  it('warns in production when links would be plain http', () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    warnOfPlainHttp({ ...loadConfig({}), production: true }, 'http://127.0.0.1:3000', logger);
    warnOfPlainHttp({ ...loadConfig({}), production: true }, 'https://mail.acme.dev', logger);
    warnOfPlainHttp({ ...loadConfig({}), production: false }, 'http://127.0.0.1:3000', logger);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, publicUrl: 'http://127.0.0.1:3000' });
  });
});
