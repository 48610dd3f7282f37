// The official `resend` SDK, pointed at a live Mailroom by its base URL alone, on SQLite and PostgreSQL.
import { Resend } from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const SEGMENT = '78261eea-8f8b-4381-83c6-79fa7120f1cf';
const uuid = expect.stringMatching(/^[0-9a-f-]{36}$/);
const email = { from: 'Acme <hello@acme.dev>', to: ['steve@example.com'], subject: 'Hi', html: '<p>Hi</p>' };

describe.each(backends)('the resend SDK on %s', (backend) => {
  let server: TestServer;
  let resend: Resend;
  beforeAll(async () => {
    // Attachments by `path` are fetched from 127.0.0.1 here (the server's own download links).
    server = await startTestServer(backend, { config: { attachmentPaths: { allowPrivate: true, timeoutMs: 5000 } } });
    resend = new Resend(server.apiKey, { baseUrl: server.url });
  });
  afterAll(() => server.close());

  it('contacts: create, list, get by id and by email, update, remove', async () => {
    const created = await resend.contacts.create({ email: 'sdk@example.com', firstName: 'Sdk', lastName: 'User' });
    expect(created).toMatchObject({ data: { object: 'contact', id: uuid }, error: null });
    const id = created.data!.id;
    const listed = await resend.contacts.list();
    expect(listed.error).toBeNull();
    expect(listed.data).toMatchObject({ object: 'list', has_more: false, data: [expect.objectContaining({ id, email: 'sdk@example.com', first_name: 'Sdk' })] });
    expect((await resend.contacts.get({ id })).data).toMatchObject({ object: 'contact', id, last_name: 'User', unsubscribed: false });
    expect((await resend.contacts.get({ email: 'sdk@example.com' })).data?.id).toBe(id);
    expect(await resend.contacts.update({ id, unsubscribed: true })).toMatchObject({ data: { object: 'contact', id }, error: null });
    expect((await resend.contacts.get({ id })).data?.unsubscribed).toBe(true);
    expect(await resend.contacts.remove({ id })).toMatchObject({ data: { object: 'contact', contact: id, deleted: true }, error: null });
    expect((await resend.contacts.get({ id })).error).toMatchObject({ name: 'not_found', statusCode: 404 });
  });

  it('batch.send: strict, permissive, and with an idempotency key', async () => {
    const strict = await resend.batch.send([email, { ...email, to: ['ada@example.com'] }]);
    expect(strict).toMatchObject({ data: { data: [{ id: uuid }, { id: uuid }] }, error: null });
    const permissive = await resend.batch.send([email, { ...email, to: ['not an address'] }], { batchValidation: 'permissive' });
    expect(permissive.error).toBeNull();
    expect(permissive.data).toMatchObject({ data: [{ id: uuid }], errors: [{ index: 1, message: expect.stringContaining('`to`') }] });
    const first = await resend.batch.send([email], { idempotencyKey: `sdk-batch-${backend}` });
    const again = await resend.batch.send([email], { idempotencyKey: `sdk-batch-${backend}` });
    expect(again.data).toEqual(first.data);
    const refused = await resend.batch.send([{ ...email, to: ['nope'] }]);
    expect(refused).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 422 } });
    const changed = await resend.batch.send([{ ...email, subject: 'Other' }], { idempotencyKey: `sdk-batch-${backend}` });
    expect(changed.error).toMatchObject({ name: 'invalid_idempotent_request', statusCode: 409 });
  });

  it('emails.send and emails.get', async () => {
    const sent = await resend.emails.send({ ...email, replyTo: 'support@acme.dev', text: 'Hi' });
    expect(sent).toMatchObject({ data: { id: uuid }, error: null });
    const got = await resend.emails.get(sent.data!.id);
    expect(got.error).toBeNull();
    expect(got.data).toMatchObject({ object: 'email', id: sent.data!.id, to: ['steve@example.com'], reply_to: ['support@acme.dev'], last_event: 'queued', message_id: null });
    // `topicId: null`, as code written for Resend passes for no topic, is taken; a topic is not.
    expect(await resend.emails.send({ ...email, topicId: null })).toMatchObject({ data: { id: uuid }, error: null });
    expect(await resend.batch.send([{ ...email, topicId: null }])).toMatchObject({ data: { data: [{ id: uuid }] }, error: null });
    expect(await resend.emails.send({ ...email, topicId: SEGMENT })).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 422, message: 'The `topic_id` must be null.' } });
    // An empty id asks for `/emails/`, which is not the list.
    for (const empty of [await resend.emails.get(''), await resend.broadcasts.get(''), await resend.templates.get('')]) {
      expect(empty).toMatchObject({ data: null, error: { statusCode: 404, name: 'not_found' } });
    }
  });

  it('emails.send with attachments (a Buffer, a base64 string, an inline image), then emails.attachments.list and get', async () => {
    const pdf = Buffer.from('%PDF-1.7 a tiny file');
    const sent = await resend.emails.send({
      ...email,
      html: '<p>Hi <img src="cid:logo"></p>',
      attachments: [
        { filename: 'invoice.pdf', content: pdf },
        { filename: 'notes.txt', content: Buffer.from('notes').toString('base64'), contentType: 'text/plain' },
        { filename: 'logo.png', content: new Uint8Array([137, 80, 78, 71]), contentId: 'logo' },
      ],
    });
    expect(sent).toMatchObject({ data: { id: uuid }, error: null });
    const stored = await server.store.emails.attachments(sent.data!.id);
    expect(stored.map((a) => [a.filename, a.content_type, a.content_id, Buffer.from(a.content, 'base64').toString('latin1')])).toEqual([
      ['invoice.pdf', 'application/pdf', null, pdf.toString('latin1')],
      ['notes.txt', 'text/plain', null, 'notes'],
      ['logo.png', 'image/png', 'logo', '\x89PNG'],
    ]);
    const listed = await resend.emails.attachments.list({ emailId: sent.data!.id });
    expect(listed.error).toBeNull();
    expect(listed.data?.data.map((a) => [a.filename, a.size, a.content_disposition])).toEqual([
      ['invoice.pdf', pdf.length, 'attachment'],
      ['notes.txt', 5, 'attachment'],
      ['logo.png', 4, 'inline'],
    ]);
    const logo = await resend.emails.attachments.get({ emailId: sent.data!.id, id: listed.data!.data[2]!.id });
    expect(logo).toMatchObject({ data: { object: 'attachment', content_id: 'logo', content_type: 'image/png' }, error: null });
    const downloaded = Buffer.from(await (await fetch(listed.data!.data[0]!.download_url)).arrayBuffer());
    expect(downloaded.equals(pdf)).toBe(true);
    expect((await resend.emails.attachments.list({ emailId: sent.data!.id, limit: 1 })).data).toMatchObject({ has_more: true, data: [{ filename: 'invoice.pdf' }] });
    // A file given by URL is fetched as the email is accepted: here, from the download link just listed.
    const byPath = await resend.emails.send({ ...email, attachments: [{ filename: 'copy.pdf', path: listed.data!.data[0]!.download_url }] });
    expect(byPath).toMatchObject({ data: { id: uuid }, error: null });
    const copied = await server.store.emails.attachments(byPath.data!.id);
    expect(copied.map((a) => [a.filename, a.content_type, Buffer.from(a.content, 'base64').equals(pdf)])).toEqual([['copy.pdf', 'application/pdf', true]]);
    const unreachable = await resend.emails.send({ ...email, attachments: [{ filename: 'a.pdf', path: 'http://127.0.0.1:1/a.pdf' }] });
    expect(unreachable).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 422, message: expect.stringContaining('`attachments.0.path` could not be fetched') } });
    expect((await resend.batch.send([{ ...email, attachments: [{ filename: 'a.txt', content: 'aGk=' }] } as never])).error).toMatchObject({ name: 'validation_error', statusCode: 422 });
  });

  it('emails.send with scheduledAt, then emails.update and emails.cancel', async () => {
    const sent = await resend.emails.send({ ...email, subject: 'Scheduled', scheduledAt: 'in 1 hour' });
    expect(sent).toMatchObject({ data: { id: uuid }, error: null });
    const id = sent.data!.id;
    expect((await resend.emails.get(id)).data).toMatchObject({ last_event: 'scheduled', scheduled_at: expect.stringMatching(/Z$/) });
    const at = new Date(Date.now() + 86_400_000).toISOString();
    expect(await resend.emails.update({ id, scheduledAt: at })).toEqual({ data: { object: 'email', id }, error: null, headers: expect.anything() });
    expect((await resend.emails.get(id)).data?.scheduled_at).toBe(at);
    expect(await resend.emails.cancel(id)).toEqual({ data: { object: 'email', id }, error: null, headers: expect.anything() });
    expect((await resend.emails.get(id)).data?.last_event).toBe('canceled');
    expect((await resend.emails.cancel(id)).error).toMatchObject({ name: 'validation_error', statusCode: 422 });
  });

  it('emails.list: newest first, paged with limit and after', async () => {
    const sent = [(await resend.emails.send({ ...email, subject: 'Listed' })).data!.id, (await resend.emails.send({ ...email, subject: 'Listed' })).data!.id];
    // Sent in the same millisecond, the two are ordered by id.
    const stamps = await Promise.all(sent.map(async (id) => (await resend.emails.get(id)).data!.created_at));
    const [newer, older] = stamps[0] === stamps[1] ? [...sent].sort().reverse() : [sent[1]!, sent[0]!];
    const page = await resend.emails.list({ limit: 1 });
    expect(page.error).toBeNull();
    expect(page.data).toMatchObject({ object: 'list', has_more: true, data: [{ id: newer, subject: 'Listed', to: ['steve@example.com'], last_event: 'queued', scheduled_at: null }] });
    const next = await resend.emails.list({ limit: 1, after: newer! });
    expect(next.data?.data.map((e) => e.id)).toEqual([older]);
  });

  it('templates.create, publish and get, then a send with it', async () => {
    const created = await resend.templates.create({ name: 'Welcome', alias: `sdk-welcome-${backend}`, html: '<p>Hi {{{NAME|there}}}</p>', subject: 'Welcome', from: 'hello@acme.dev' });
    expect(created).toMatchObject({ data: { object: 'template', id: uuid }, error: null });
    expect((await resend.templates.publish(created.data!.id)).data).toMatchObject({ object: 'template', id: created.data!.id });
    expect((await resend.templates.get(`sdk-welcome-${backend}`)).data).toMatchObject({ status: 'published', html: '<p>Hi {{{NAME|there}}}</p>' });
    const sent = await resend.emails.send({ to: ['ann@example.com'], template: { id: `sdk-welcome-${backend}`, variables: { NAME: 'Ann' } } } as never);
    expect(sent.error).toBeNull();
    expect((await resend.emails.get(sent.data!.id)).data).toMatchObject({ subject: 'Welcome', html: '<p>Hi Ann</p>' });
    // By its id in capitals, as every other id is taken; through a base URL written with a trailing slash.
    const slashed = new Resend(server.apiKey, { baseUrl: `${server.url}/` });
    const byUpperId = await slashed.emails.send({ to: ['bo@example.com'], template: { id: created.data!.id.toUpperCase(), variables: { NAME: 'Bo' } } } as never);
    expect(byUpperId.error).toBeNull();
    expect((await slashed.emails.get(byUpperId.data!.id)).data).toMatchObject({ subject: 'Welcome', html: '<p>Hi Bo</p>' });
    expect((await slashed.templates.get(`sdk-welcome-${backend}`)).data).toMatchObject({ id: created.data!.id });
  });

  it('templates.duplicate: a draft copy of the draft, without the alias, by id or by alias', async () => {
    const created = await resend.templates.create({ name: 'Receipt', alias: `sdk-receipt-${backend}`, html: '<p>Paid {{{AMOUNT}}}</p>', subject: 'Receipt', variables: [{ key: 'AMOUNT', type: 'number', fallbackValue: 0 }] });
    await resend.templates.publish(created.data!.id);
    await resend.templates.update(created.data!.id, { html: '<p>Paid {{{AMOUNT}}} in full</p>' });
    const copy = await resend.templates.duplicate(`sdk-receipt-${backend}`);
    expect(copy).toMatchObject({ data: { object: 'template', id: uuid }, error: null });
    expect(copy.data!.id).not.toBe(created.data!.id);
    const got = (await resend.templates.get(copy.data!.id)).data;
    expect(got).toMatchObject({ name: 'Receipt', alias: null, status: 'draft', subject: 'Receipt', html: '<p>Paid {{{AMOUNT}}} in full</p>', variables: [{ key: 'AMOUNT', type: 'number', fallback_value: 0 }], published_at: null });
    expect((await resend.templates.get(`sdk-receipt-${backend}`)).data?.id).toBe(created.data!.id);
    expect((await resend.templates.duplicate('00000000-0000-4000-8000-000000000000')).error).toMatchObject({ statusCode: 404, name: 'not_found' });
  });

  it('templates.update, list and remove', async () => {
    const created = await resend.templates.create({ name: 'Reset', alias: `sdk-reset-${backend}`, html: '<p>Reset</p>' });
    expect((await resend.templates.update(created.data!.id, { subject: 'Reset your password', replyTo: 'help@acme.dev', variables: [{ key: 'URL', type: 'string', fallbackValue: 'x' }] })).data).toMatchObject({ object: 'template', id: created.data!.id });
    expect((await resend.templates.get(created.data!.id)).data).toMatchObject({ subject: 'Reset your password', reply_to: ['help@acme.dev'], variables: [{ key: 'URL', type: 'string', fallback_value: 'x' }], html: '<p>Reset</p>' });
    const listed = await resend.templates.list({ limit: 1 });
    expect(listed.error).toBeNull();
    expect(listed.data).toMatchObject({ object: 'list', has_more: true, data: [{ id: created.data!.id, name: 'Reset', alias: `sdk-reset-${backend}`, status: 'draft' }] });
    expect((await resend.templates.remove(`sdk-reset-${backend}`)).data).toMatchObject({ object: 'template', id: created.data!.id, deleted: true });
    expect((await resend.templates.get(created.data!.id)).error).toMatchObject({ name: 'not_found', statusCode: 404 });
  });

  it('apiKeys.create, list, update and remove', async () => {
    const created = await resend.apiKeys.create({ name: 'SDK key', permission: 'sending_access' });
    expect(created).toMatchObject({ data: { id: uuid, token: expect.stringMatching(/^re_/) }, error: null });
    const listed = await resend.apiKeys.list();
    expect(listed.error).toBeNull();
    expect(listed.data?.data.find((key) => key.id === created.data!.id)).toMatchObject({ name: 'SDK key', created_at: expect.any(String), last_used_at: null });
    expect((await resend.apiKeys.update(created.data!.id, { name: 'SDK key, renamed' })).data).toMatchObject({ object: 'api_key', id: created.data!.id });
    expect((await resend.apiKeys.remove(created.data!.id)).data).toMatchObject({ object: 'api_key', id: created.data!.id, deleted: true });
    expect((await resend.apiKeys.list()).data?.data.map((key) => key.id)).not.toContain(created.data!.id);
  });

  it('broadcasts.create and get, and errors with the right name and status', async () => {
    const created = await resend.broadcasts.create({ segmentId: SEGMENT, from: 'news@acme.dev', subject: 'News', html: '<p>{{{FIRST_NAME|there}}}</p>', name: 'News' });
    expect(created).toMatchObject({ data: { id: uuid }, error: null });
    const got = await resend.broadcasts.get(created.data!.id);
    expect(got.data).toMatchObject({ object: 'broadcast', segment_id: SEGMENT, audience_id: SEGMENT, status: 'draft', html: '<p>{{{FIRST_NAME|there}}}</p>' });
    expect((await resend.broadcasts.get('00000000-0000-4000-8000-000000000000')).error).toMatchObject({ name: 'not_found', statusCode: 404, message: 'Broadcast not found' });
    const stranger = new Resend('re_not_a_real_key_000000000000000000', { baseUrl: server.url });
    expect((await stranger.contacts.list()).error).toMatchObject({ name: 'invalid_api_key', statusCode: 403 });
  });

  it('the calls for what Mailroom lacks answer 404 not_found, even where a path of its own would take them for an id', async () => {
    const calls = [
      resend.contacts.imports.list(),
      resend.contacts.imports.list({ limit: 5 }),
      resend.contacts.imports.create({ file: new Blob(['email\nada@example.com\n'], { type: 'text/csv' }) }),
      resend.contacts.imports.get('00000000-0000-4000-8000-000000000000'),
      resend.emails.metrics(),
      resend.emails.receiving.list(),
      resend.contactProperties.list(),
      resend.webhooks.events.attempts.list({ webhookId: '00000000-0000-4000-8000-000000000000', eventId: 'msg_000000000000AAAAAAAAAAAA' }),
      resend.domains.claims.create({ name: 'claimed.example.com' }),
      resend.domains.claims.get('00000000-0000-4000-8000-000000000000'),
      resend.domains.claims.verify('00000000-0000-4000-8000-000000000000'),
    ];
    for (const answer of await Promise.all(calls)) expect(answer.error).toMatchObject({ name: 'not_found', statusCode: 404 });
  });
});
