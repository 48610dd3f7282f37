// POST /emails/batch and POST /emails: validation modes, templates, idempotency; on SQLite and PostgreSQL.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const email = (n: number, extra: Record<string, unknown> = {}) => ({ from: 'Acme <hi@acme.dev>', to: [`user${n}@example.com`], subject: `Hello ${n}`, html: `<p>Hello ${n}</p>`, ...extra });

describe.each(backends)('sending on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  const countEmails = async () => Number((await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  const batch = (body: unknown, headers: Record<string, string> = {}) =>
    server.request('/emails/batch', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }).then(async (res) => ({ status: res.status, body: await res.json() }));

  describe('strict mode (the default)', () => {
    it('accepts 100 emails, returns their ids in request order, and queues them', async () => {
      const items = Array.from({ length: 100 }, (_, n) => email(n));
      const { status, body } = await batch(items);
      expect(status).toBe(200);
      expect(Object.keys(body)).toEqual(['data']);
      expect(body.data).toHaveLength(100);
      for (const n of [0, 57, 99]) {
        const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: body.data[n].id } } });
        expect(data).toMatchObject({ object: 'email', to: [`user${n}@example.com`], subject: `Hello ${n}`, last_event: 'queued' });
      }
    });

    it.each([0, 4, 9])('rejects the whole batch when email %i is bad, naming it, and stores nothing', async (bad) => {
      const before = await countEmails();
      const items = Array.from({ length: 10 }, (_, n) => (n === bad ? { from: 'a@acme.dev', subject: 'no recipient', text: 'x' } : email(n)));
      const { status, body } = await batch(items, { 'x-batch-validation': 'strict' });
      expect(status).toBe(422);
      expect(body).toEqual({ statusCode: 422, name: 'validation_error', message: `emails[${bad}]: Missing \`to\` field.` });
      expect(await countEmails()).toBe(before);
    });

    it.each([
      [{ attachments: [{ filename: 'a.txt' }] }, 'The field `attachments` is not supported in a batch; send that email on its own.'],
      [{ scheduled_at: 'in 1 hour' }, 'The field `scheduled_at` is not supported in a batch; send that email on its own.'],
      [{ to: Array.from({ length: 51 }, (_, i) => `u${i}@example.com`) }, 'The `to` must be one address, or up to 50 of them.'],
      [{ from: 'not an address' }, 'Invalid `from` address `not an address`: use `address@domain` or `Display Name <address@domain>`.'],
      [{ headers: { 'X-Inject': 'a\r\nBcc: victim@example.com' } }, 'The `headers.X-Inject` must be one line, with no control character but tab.'],
      [{ headers: { References: '<ä@example.com>' } }, 'The `headers.References` must be one line of printable ASCII (tabs allowed), as a structured header takes no encoded text.'],
      [{ template: { id: 'welcome' } }, 'The field `html` cannot be combined with `template`.'],
      [{ subject: undefined }, 'Missing `subject` field.'],
    ])('names what is wrong with %j', async (change, message) => {
      const { status, body } = await batch([email(1), { ...email(2), ...change }]);
      expect(status).toBe(422);
      expect(body.message).toBe(`emails[1]: ${message}`);
    });
  });

  it('names a missing field of a single email missing_required_field, whether the schema or a template would have given it; a batch, validation_error', async () => {
    const single = (body: unknown) => server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((res) => res.json());
    const { from: _from, ...noFrom } = email(1);
    const { to: _to, ...noTo } = email(1);
    const { html: _html, ...noBody } = email(1);
    for (const [body, field] of [[noFrom, '`from`'], [noTo, '`to`'], [noBody, '`html` or `text`']] as const) {
      expect(await single(body)).toEqual({ statusCode: 422, name: 'missing_required_field', message: `Missing ${field} field.` });
      expect((await batch([email(2), body])).body).toEqual({ statusCode: 422, name: 'validation_error', message: `emails[1]: Missing ${field} field.` });
    }
    expect((await single({ ...email(1), from: 'not an address' })).name).toBe('validation_error');
  });

  describe('permissive mode', () => {
    it('sends the good emails of 100 and reports bad ones at the first, middle and last index', async () => {
      const before = await countEmails();
      const items: unknown[] = Array.from({ length: 100 }, (_, n) => email(n));
      items[0] = { ...email(0), to: undefined };
      items[50] = { ...email(50), attachments: [] };
      items[99] = { ...email(99), from: 'Acme <nope>' };
      const { status, body } = await batch(items, { 'x-batch-validation': 'permissive' });
      expect(status).toBe(200);
      expect(body.data).toHaveLength(97);
      expect(body.errors).toEqual([
        { index: 0, message: 'Missing `to` field.' },
        { index: 50, message: 'The field `attachments` is not supported in a batch; send that email on its own.' },
        { index: 99, message: 'Invalid `from` address `Acme <nope>`: use `address@domain` or `Display Name <address@domain>`.' },
      ]);
      expect(await countEmails()).toBe(before + 97);
      // data keeps request order: the 2nd id is email 2, since email 0 was left out.
      const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: body.data[1].id } } });
      expect(data?.to).toEqual(['user2@example.com']);
    });

    it('answers 200 with no data when every email is bad', async () => {
      const { status, body } = await batch([{ to: 'a@b.dev' }, { from: 'a@b.dev' }], { 'x-batch-validation': 'permissive' });
      expect(status).toBe(200);
      expect(body).toEqual({ data: [], errors: [{ index: 0, message: 'Missing `from` field.' }, { index: 1, message: 'Missing `to` field.' }] });
    });
  });

  describe('request-level rules, in both modes', () => {
    it.each(['strict', 'permissive'])('%s: refuses 101 emails, 0 emails, a non-array and an unknown mode', async (mode) => {
      for (const body of [Array.from({ length: 101 }, (_, n) => email(n)), [], email(1)]) {
        const res = await batch(body, { 'x-batch-validation': mode });
        expect(res.status, JSON.stringify(res.body)).toBe(422);
        expect(res.body.name).toBe('validation_error');
      }
      const badMode = await batch([email(1)], { 'x-batch-validation': 'lenient' });
      expect(badMode.status).toBe(422);
      expect(badMode.body.message).toContain('x-batch-validation');
    });
  });

  it('takes an empty cc, bcc or reply_to list as no address, as Resend does, on an email, a broadcast and a template', async () => {
    const sent = await batch([email(1, { cc: [], bcc: [], reply_to: [] })]);
    expect(sent.status).toBe(200);
    const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: sent.body.data[0].id } } });
    expect(data).toMatchObject({ cc: null, bcc: null, reply_to: null });

    const { data: segment } = await server.client.POST('/segments', { body: { name: 'Empty lists' } });
    const { data: broadcast } = await server.client.POST('/broadcasts', { body: { segment_id: segment!.id, from: 'a@acme.dev', subject: 's', text: 't', reply_to: [] } });
    const read = async () => (await server.client.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: broadcast!.id } } })).data!;
    expect((await read()).reply_to).toBeNull();
    await server.client.PATCH('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: broadcast!.id } }, body: { reply_to: ['help@acme.dev'] } });
    expect((await read()).reply_to).toEqual(['help@acme.dev']);
    await server.client.PATCH('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: broadcast!.id } }, body: { reply_to: [] } });
    expect((await read()).reply_to).toBeNull();

    // An empty reply_to on a send is no reply-to, not the template's.
    const { data: template } = await server.client.POST('/templates', { body: { name: 'Replying', html: '<p>x</p>', subject: 's', from: 'a@acme.dev', reply_to: 'help@acme.dev' } });
    await server.client.POST('/templates/{template_id}/publish', { params: { path: { template_id: template!.id } } });
    const [withDefault, without] = (await batch([{ to: 'a@b.dev', template: { id: template!.id } }, { to: 'a@b.dev', reply_to: [], template: { id: template!.id } }])).body.data;
    const replyTo = async (id: string) => (await server.client.GET('/emails/{email_id}', { params: { path: { email_id: id } } })).data!.reply_to;
    expect(await replyTo(withDefault.id)).toEqual(['help@acme.dev']);
    expect(await replyTo(without.id)).toBeNull();
    await server.client.PATCH('/templates/{template_id}', { params: { path: { template_id: template!.id } }, body: { reply_to: [] } });
    expect((await server.client.GET('/templates/{template_id}', { params: { path: { template_id: template!.id } } })).data!.reply_to).toBeNull();
  });

  describe('templates', () => {
    beforeAll(async () => {
      const created = await server.client.POST('/templates', {
        body: {
          name: 'Welcome',
          alias: 'welcome',
          from: 'Acme <welcome@acme.dev>',
          subject: 'Welcome, {{{FIRST_NAME|friend}}}',
          html: '<p>Hi {{{FIRST_NAME}}}, you get {{{TRIAL_DAYS}}} days on {{{PLAN|the free plan}}}.</p>',
          variables: [{ key: 'FIRST_NAME', type: 'string' }, { key: 'TRIAL_DAYS', type: 'number', fallback_value: 30 }],
        },
      });
      expect(created.response.status).toBe(201);
      await server.client.POST('/templates', { body: { name: 'Draft only', alias: 'draft-only', html: '<p>x</p>', subject: 's', from: 'a@acme.dev' } });
    });

    it('is a draft until published, then sends rendered with escaped values and fallbacks', async () => {
      const draft = await server.client.GET('/templates/{template_id}', { params: { path: { template_id: 'welcome' } } });
      expect(draft.data).toMatchObject({ object: 'template', alias: 'welcome', status: 'draft', published_at: null });
      const unpublished = await batch([{ to: 'a@b.dev', template: { id: 'welcome', variables: { FIRST_NAME: 'Ann' } } }]);
      expect(unpublished.body.message).toBe('emails[0]: Template `welcome` is not published; publish it before sending with it.');

      const published = await server.client.POST('/templates/{template_id}/publish', { params: { path: { template_id: 'welcome' } } });
      expect(published.data).toEqual({ object: 'template', id: draft.data!.id });
      const { data: after } = await server.client.GET('/templates/{template_id}', { params: { path: { template_id: draft.data!.id } } });
      expect(after).toMatchObject({ status: 'published', published_at: expect.any(String) });

      const sent = await batch([{ to: 'a@b.dev', template: { id: 'welcome', variables: { FIRST_NAME: '<Ann & Bob>' } } }]);
      expect(sent.status).toBe(200);
      const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: sent.body.data[0].id } } });
      expect(data).toMatchObject({
        from: 'Acme <welcome@acme.dev>',
        subject: 'Welcome, <Ann & Bob>',
        html: '<p>Hi &lt;Ann &amp; Bob&gt;, you get 30 days on the free plan.</p>',
      });
    });

    it('lets the send override from and subject, and takes variables as a list of pairs', async () => {
      const sent = await batch([{ from: 'Ops <ops@acme.dev>', subject: 'Custom', to: 'a@b.dev', template: { id: 'welcome', variables: [{ key: 'FIRST_NAME', value: 'Cy' }, { key: 'TRIAL_DAYS', value: 7 }] } }]);
      const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: sent.body.data[0].id } } });
      expect(data).toMatchObject({ from: 'Ops <ops@acme.dev>', subject: 'Custom', html: '<p>Hi Cy, you get 7 days on the free plan.</p>' });
    });

    it.each([
      [{ id: 'welcome' }, 'Missing template variable `FIRST_NAME`; give it in `template.variables` or declare a fallback.'],
      [{ id: 'welcome', variables: { FIRST_NAME: 'A', TRIAL_DAYS: 'ten' } }, 'The template variable `TRIAL_DAYS` must be a number.'],
      [{ id: 'no-such-template' }, 'Template `no-such-template` not found.'],
      [{ id: 'draft-only' }, 'Template `draft-only` is not published; publish it before sending with it.'],
    ])('refuses %j, naming the problem', async (template, message) => {
      const { status, body } = await batch([{ to: 'a@b.dev', template }]);
      expect(status).toBe(422);
      expect(body.message).toBe(`emails[0]: ${message}`);
      const single = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ to: 'a@b.dev', template }) });
      expect(await single.json()).toEqual({ statusCode: 422, name: 'validation_error', message });
    });

    it('refuses a second template with the same alias, and unknown templates are 404', async () => {
      const again = await server.client.POST('/templates', { body: { name: 'Other', alias: 'welcome', html: '<p>x</p>' } });
      expect(again.error).toMatchObject({ statusCode: 422, message: 'A template with the alias `welcome` already exists.' });
      const missing = await server.client.GET('/templates/{template_id}', { params: { path: { template_id: 'nope' } } });
      expect(missing.error).toEqual({ statusCode: 404, name: 'not_found', message: 'Template not found' });
    });
  });

  describe('idempotency', () => {
    const keyed = (key: string, body: unknown, mode = 'strict') => batch(body, { 'idempotency-key': key, 'x-batch-validation': mode });

    it('replays the first response for the same key and body, and stores the batch once', async () => {
      const before = await countEmails();
      const first = await keyed('replay-1', [email(1), email(2)]);
      const second = await keyed('replay-1', [email(1), email(2)]);
      expect(first.status).toBe(200);
      expect(second).toEqual(first);
      expect(await countEmails()).toBe(before + 2);
    });

    it('replays for the same JSON sent again in other words: keys in another order, other spacing', async () => {
      const raw = (text: string) =>
        server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'same-json' }, body: text }).then(async (res) => ({ status: res.status, body: await res.json() }));
      const before = await countEmails();
      const first = await raw('{"from":"a@acme.dev","to":["b@example.com"],"subject":"Same","text":"x","tags":[{"name":"k","value":"v"}]}');
      expect(first.status).toBe(200);
      const again = await raw('{ "tags": [ { "value": "v", "name": "k" } ],\n  "text": "x", "subject": "Same", "to": [ "b@example.com" ], "from": "a@acme.dev" }');
      expect(again).toEqual(first);
      expect(await countEmails()).toBe(before + 1);
      const other = await raw('{"from":"a@acme.dev","to":["b@example.com"],"subject":"Same","text":"x","tags":[{"name":"k","value":"w"}]}');
      expect(other).toMatchObject({ status: 409, body: { name: 'invalid_idempotent_request' } });
    });

    it('refuses the same key with another body, or another validation mode, with 409', async () => {
      await keyed('other-body', [email(1)]);
      const changed = await keyed('other-body', [email(2)]);
      expect(changed).toMatchObject({ status: 409, body: { name: 'invalid_idempotent_request' } });
      const mode = await keyed('other-body', [email(1)], 'permissive');
      expect(mode).toMatchObject({ status: 409, body: { name: 'invalid_idempotent_request' } });
    });

    it('lets exactly one of concurrent requests with one key store its batch', async () => {
      const before = await countEmails();
      const items = Array.from({ length: 50 }, (_, n) => email(n));
      const results = await Promise.all(Array.from({ length: 6 }, () => keyed('race-1', items)));
      const ok = results.filter((r) => r.status === 200);
      const busy = results.filter((r) => r.status === 409);
      expect(ok.length + busy.length).toBe(6);
      expect(ok.length).toBeGreaterThanOrEqual(1);
      for (const r of ok) expect(r.body).toEqual(ok[0]!.body); // later ones are replays of the first
      for (const r of busy) expect(r.body.name).toBe('concurrent_idempotent_requests');
      expect(await countEmails()).toBe(before + 50);
    });

    it('refuses an empty key or one over 256 characters with 400', async () => {
      for (const key of ['', 'k'.repeat(257)]) {
        const res = await keyed(key, [email(1)]);
        expect(res).toMatchObject({ status: 400, body: { name: 'invalid_idempotency_key' } });
      }
      expect((await keyed('k'.repeat(256), [email(1)])).status).toBe(200);
    });

    it('refuses an Idempotency-Key header given twice, which Node would join into one key', async () => {
      const body = JSON.stringify([email(1)]);
      const answer = await new Promise<{ status: number; body: { name: string; message: string } }>((resolve, reject) => {
        const req = request(`${server.url}/emails/batch`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json', 'idempotency-key': ['first', 'second'] } }, (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end(body);
      });
      expect(answer).toEqual({ status: 400, body: { statusCode: 400, name: 'invalid_idempotency_key', message: 'The `Idempotency-Key` is given more than once; give it once.' } });
      expect((await keyed('first, second', [email(1)])).status).toBe(200);
    });

    it('does not use up a key on a request refused before anything was created', async () => {
      const refused = await keyed('fix-and-retry', [{ ...email(1), to: undefined }]);
      expect(refused.status).toBe(422);
      const fixed = await keyed('fix-and-retry', [email(1)]);
      expect(fixed.status).toBe(200);
    });

    it('forgets a key after 24 hours', async () => {
      const first = await keyed('expiring', [email(1)]);
      const expired = new Date(Date.now() - 1000).toISOString();
      await server.store.database.db.updateTable('idempotency_records').set({ expires_at: expired }).where('key', '=', 'expiring').execute();
      const again = await keyed('expiring', [email(1)]);
      expect(again.status).toBe(200);
      expect(again.body.data[0].id).not.toBe(first.body.data[0].id);
      expect(await server.store.idempotency.purgeExpired(new Date(Date.now() + 25 * 3600 * 1000))).toBeGreaterThan(0);
    });

    it('works the same on POST /emails', async () => {
      const send = (body: unknown) =>
        server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'single-1' }, body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, body: await r.json() }));
      const first = await send(email(1));
      expect(await send(email(1))).toEqual(first);
      expect((await send(email(2))).status).toBe(409);
    });
  });

  it('a sending_access key may send but not read', async () => {
    const { createKey } = await import('../../server/apiKeys/key.ts');
    const { key } = await createKey(server.store, 'sender', 'sending_access');
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const sent = await fetch(`${server.url}/emails`, { method: 'POST', headers, body: JSON.stringify(email(1)) });
    expect(sent.status).toBe(200);
    const { id } = await sent.json();
    const read = await fetch(`${server.url}/emails/${id}`, { headers });
    expect(read.status).toBe(401);
    expect((await read.json()).name).toBe('restricted_api_key');
  });
});
