// The webhook operations over HTTP, on SQLite and PostgreSQL: create, list, retrieve, update,
// delete and rotate a signing secret; the errors of each; and the rules an endpoint must meet, in the spellings that try to slip
// past them, with WEBHOOK_ALLOW_PRIVATE off and on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const json = (body: unknown) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** Endpoints refused unless private addresses are allowed, with a word the refusal must say. */
const REFUSED: [string, RegExp][] = [
  ['http://hooks.example.com/in', /https URL/],
  ['https://user:secret@hooks.example.com/in', /user name or password/],
  ['https://@hooks.example.com/in', /user name or password/],
  ['https://hooks.example.com:0/in', /port must be from 1 to 65535/],
  // Read as the host `internal` by WHATWG's parser and as no host by RFC 3986's.
  ['https:///internal/in', /scheme, `\/\/` and a host/],
  ['https://localhost/in', /localhost/],
  ['https://LOCALHOST./in', /localhost/],
  ['https://api.localhost:8443/in', /localhost/],
  ['https://127.0.0.1/in', /loopback/],
  ['https://127.1/in', /loopback/],
  ['https://2130706433/in', /loopback/],
  ['https://0x7f000001/in', /loopback/],
  ['https://0177.0.0.1/in', /loopback/],
  ['https://0x7f.0.0.1/in', /loopback/],
  ['https://10.1.2.3/in', /private/],
  ['https://172.16.0.1/in', /private/],
  ['https://192.168.1.10:8080/in', /private/],
  ['https://169.254.169.254/latest/meta-data', /link-local/],
  ['https://100.64.0.1/in', /shared \(carrier-grade NAT\)/],
  ['https://0.0.0.0/in', /unspecified/],
  ['https://224.0.0.1/in', /multicast/],
  ['https://[::1]/in', /loopback/],
  ['https://[::]/in', /unspecified/],
  ['https://[::ffff:127.0.0.1]/in', /loopback/],
  ['https://[::ffff:7f00:1]/in', /loopback/],
  ['https://[::ffff:10.0.0.1]/in', /private/],
  ['https://[fd12:3456::1]/in', /unique-local/],
  ['https://[fe80::1]/in', /link-local/],
  ['https://[64:ff9b::a9fe:a9fe]/in', /link-local/],
  ['https://[2002:7f00:1::1]/in', /loopback/],
  ['https://[2001:db8::1]/in', /documentation/],
];
const ACCEPTED = ['https://hooks.example.com/in', 'https://8.8.8.8/in', 'https://[2606:4700:4700::1111]/in', 'https://[::ffff:8.8.8.8]/in', 'https://hooks.example.com:8443/in?x=1'];

describe.each(backends)('webhooks on %s', (backend) => {
  let server: TestServer;
  let open: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
    open = await startTestServer(backend, { config: { webhooks: { ...loadConfig({}).webhooks, allowPrivate: true } } });
  });
  afterAll(async () => {
    await server?.close();
    await open?.close();
  });

  const create = (body: unknown, on = server) => on.request('/webhooks', { method: 'POST', ...json(body) });

  it('creates a webhook with a whsec_ secret of 32 random bytes, and reads it back whole', async () => {
    const res = await create({ endpoint: 'https://hooks.example.com/mailroom', events: ['email.sent', 'email.bounced'] });
    expect(res.status).toBe(201);
    const created = await res.json();
    expect(created).toEqual({ object: 'webhook', id: expect.any(String), signing_secret: expect.stringMatching(/^whsec_/) });
    expect(Buffer.from(created.signing_secret.slice(6), 'base64')).toHaveLength(32);
    const got = await (await server.request(`/webhooks/${created.id}`)).json();
    expect(got).toEqual({
      object: 'webhook', id: created.id, endpoint: 'https://hooks.example.com/mailroom', events: ['email.sent', 'email.bounced'],
      status: 'enabled', status_reason: null, created_at: expect.stringMatching(/Z$/), signing_secret: created.signing_secret,
    });
    const other = await (await create({ endpoint: 'https://hooks.example.com/mailroom', events: ['email.sent'] })).json();
    expect(other.signing_secret).not.toBe(created.signing_secret);
  });

  it('lists webhooks newest first without their secrets, paged or whole', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.unshift((await (await create({ endpoint: `https://hooks.example.com/${i}`, events: ['contact.created'] })).json()).id);
    const whole = await (await server.request('/webhooks')).json();
    expect(whole.has_more).toBe(false);
    expect(whole.data.slice(0, 5).map((w: { id: string }) => w.id)).toEqual(ids);
    expect(whole.data.every((w: object) => !('signing_secret' in w))).toBe(true);
    const first = await (await server.request('/webhooks?limit=2')).json();
    expect(first).toMatchObject({ object: 'list', has_more: true });
    expect(first.data.map((w: { id: string }) => w.id)).toEqual(ids.slice(0, 2));
    const next = await (await server.request(`/webhooks?limit=2&after=${ids[1]}`)).json();
    expect(next.data.map((w: { id: string }) => w.id)).toEqual(ids.slice(2, 4));
    const back = await (await server.request(`/webhooks?limit=2&before=${ids[2]}`)).json();
    expect(back.data.map((w: { id: string }) => w.id)).toEqual(ids.slice(0, 2));
    expect((await server.request(`/webhooks?after=${crypto.randomUUID()}`)).status).toBe(422);
    expect((await server.request(`/webhooks?after=${ids[0]}&before=${ids[1]}`)).status).toBe(422);
    expect((await server.request('/webhooks?limit=0')).status).toBe(422);
  });

  it('updates the endpoint, the events and the status, and re-enabling clears the reason the server gave', async () => {
    const { id } = await (await create({ endpoint: 'https://hooks.example.com/a', events: ['email.sent'] })).json();
    const patch = (body: unknown) => server.request(`/webhooks/${id}`, { method: 'PATCH', ...json(body) });
    const read = async () => (await server.request(`/webhooks/${id}`)).json();
    expect(await (await patch({ endpoint: 'https://hooks.example.com/b', events: ['email.delivered', 'contact.deleted'] })).json()).toEqual({ object: 'webhook', id });
    expect(await read()).toMatchObject({ endpoint: 'https://hooks.example.com/b', events: ['email.delivered', 'contact.deleted'], status: 'enabled' });
    expect((await patch({ status: 'disabled' })).status).toBe(200);
    expect(await read()).toMatchObject({ status: 'disabled', status_reason: null, endpoint: 'https://hooks.example.com/b' });
    await server.store.database.db.updateTable('webhooks').set({ status_reason: 'Disabled by the server: failing' }).where('id', '=', id).execute();
    expect((await patch({})).status).toBe(200);
    expect((await read()).status_reason).toBe('Disabled by the server: failing');
    expect((await patch({ status: 'enabled' })).status).toBe(200);
    expect(await read()).toMatchObject({ status: 'enabled', status_reason: null });
  });

  it('rotates the signing secret: a new one is returned and kept, the one it replaced is kept for a day, and a missing webhook is 404', async () => {
    const { id, signing_secret: first } = await (await create({ endpoint: 'https://hooks.example.com/rotate', events: ['email.sent'] })).json();
    const rotate = (webhookId: string) => server.request(`/webhooks/${webhookId}/signing-secret/rotate`, { method: 'POST' });
    const before = Date.now();
    const rotated = await rotate(id);
    expect(rotated.status).toBe(200);
    const { signing_secret: second, ...rest } = await rotated.json();
    expect(rest).toEqual({ object: 'webhook', id });
    expect(second).toMatch(/^whsec_/);
    expect(second).not.toBe(first);
    expect((await (await server.request(`/webhooks/${id}`)).json()).signing_secret).toBe(second);
    const stored = await server.store.webhooks.find(id);
    expect(stored?.previous_signing_secret).toBe(first);
    const keptFor = Date.parse(stored!.previous_secret_expires_at!) - before;
    expect(keptFor).toBeGreaterThanOrEqual(24 * 3600_000);
    expect(keptFor).toBeLessThan(24 * 3600_000 + 60_000);
    // Again: the secret just replaced is the one kept, and the first signs no more.
    const third = (await (await rotate(id)).json()).signing_secret;
    expect((await server.store.webhooks.find(id))).toMatchObject({ signing_secret: third, previous_signing_secret: second });
    const missing = await rotate('00000000-0000-4000-8000-000000000000');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ statusCode: 404, name: 'not_found', message: 'Webhook not found' });
    expect((await rotate('nope')).status).toBe(422);
  });

  it('deletes a webhook; then it is not found anywhere', async () => {
    const { id } = await (await create({ endpoint: 'https://hooks.example.com/gone', events: ['email.sent'] })).json();
    expect(await (await server.request(`/webhooks/${id}`, { method: 'DELETE' })).json()).toEqual({ object: 'webhook', id, deleted: true });
    for (const [method, body] of [['GET'], ['DELETE'], ['PATCH', json({ status: 'enabled' })]] as const) {
      const res = await server.request(`/webhooks/${id}`, { method, ...body });
      expect(res.status, method).toBe(404);
      expect(await res.json()).toEqual({ statusCode: 404, name: 'not_found', message: 'Webhook not found' });
    }
    expect((await (await server.request('/webhooks')).json()).data.map((w: { id: string }) => w.id)).not.toContain(id);
    // The id of something else is no webhook either.
    const contact = await (await server.request('/contacts', { method: 'POST', ...json({ email: `hook-${backend}@example.com` }) })).json();
    expect((await server.request(`/webhooks/${contact.id}`)).status).toBe(404);
  });

  it.each([
    ['an email', 'reader@example.com'],
    ['a word', 'webhook'],
    ['a NUL', 'a%00b'],
    ['a huge id', 'f'.repeat(5000)],
  ])('refuses %s in place of an id with 422 invalid_parameter', async (_, id) => {
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const res = await server.request(`/webhooks/${id}`, { method, ...(method === 'PATCH' && json({ status: 'enabled' })) });
      expect(res.status, method).toBe(422);
      expect((await res.json()).name).toBe('invalid_parameter');
    }
  });

  it.each([
    ['no events', { endpoint: 'https://hooks.example.com/x', events: [] }, 'validation_error'],
    ['an event twice', { endpoint: 'https://hooks.example.com/x', events: ['email.sent', 'email.sent'] }, 'validation_error'],
    ['an unknown event', { endpoint: 'https://hooks.example.com/x', events: ['email.openned'] }, 'validation_error'],
    ['no endpoint', { events: ['email.sent'] }, 'missing_required_field'],
    ['no events at all', { endpoint: 'https://hooks.example.com/x' }, 'missing_required_field'],
    ['another field', { endpoint: 'https://hooks.example.com/x', events: ['email.sent'], secret: 'mine' }, 'validation_error'],
    ['a relative endpoint', { endpoint: '/hooks', events: ['email.sent'] }, 'validation_error'],
    ['an ftp endpoint', { endpoint: 'ftp://hooks.example.com/x', events: ['email.sent'] }, 'validation_error'],
    ['a NUL in the endpoint', { endpoint: 'https://hooks.example.com/\u0000', events: ['email.sent'] }, 'validation_error'],
    ['a huge endpoint', { endpoint: `https://hooks.example.com/${'a'.repeat(3000)}`, events: ['email.sent'] }, 'validation_error'],
  ])('refuses %s with 422', async (_, body, name) => {
    const res = await create(body);
    expect(res.status).toBe(422);
    expect((await res.json()).name).toBe(name);
  });

  it('subscribes to events Resend sends and Mailroom never does, as code written for Resend asks, and names what an unknown event should be', async () => {
    const events = ['email.sent', 'email.opened', 'email.clicked', 'suppression.added', 'inbox.draft.deleted'];
    const res = await create({ endpoint: 'https://hooks.example.com/all', events });
    expect(res.status).toBe(201);
    const { id } = await res.json();
    expect((await (await server.request(`/webhooks/${id}`)).json()).events).toEqual(events);
    const refused = await create({ endpoint: 'https://hooks.example.com/all', events: ['email.sent', 'email.openned'] });
    expect(await refused.json()).toEqual({ statusCode: 422, name: 'validation_error', message: "The `events.1` must be an event by Resend's name, such as `email.sent` or `contact.created`." });
  });

  it.each(REFUSED)('refuses the endpoint %s, naming the rule', async (endpoint, rule) => {
    const res = await create({ endpoint, events: ['email.sent'] });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.name).toBe('validation_error');
    expect(body.message).toMatch(rule);
  });

  it('accepts public hosts and addresses, and refuses a private endpoint on update too', async () => {
    for (const endpoint of ACCEPTED) expect((await create({ endpoint, events: ['email.sent'] })).status, endpoint).toBe(201);
    const { id } = await (await create({ endpoint: 'https://hooks.example.com/keep', events: ['email.sent'] })).json();
    const res = await server.request(`/webhooks/${id}`, { method: 'PATCH', ...json({ endpoint: 'https://169.254.169.254/', events: ['email.failed'] }) });
    expect(res.status).toBe(422);
    expect((await res.json()).message).toMatch(/link-local/);
    expect(await (await server.request(`/webhooks/${id}`)).json()).toMatchObject({ endpoint: 'https://hooks.example.com/keep', events: ['email.sent'] });
  });

  it('with WEBHOOK_ALLOW_PRIVATE=true takes http and private addresses, but still no credentials', async () => {
    for (const endpoint of ['http://127.0.0.1:9/in', 'https://localhost/in', 'http://[::1]:8080/in', 'https://10.0.0.8/in']) {
      expect((await create({ endpoint, events: ['email.sent'] }, open)).status, endpoint).toBe(201);
    }
    const res = await create({ endpoint: 'http://admin:pw@127.0.0.1/in', events: ['email.sent'] }, open);
    expect(res.status).toBe(422);
    expect((await res.json()).message).toMatch(/user name or password/);
  });

  it('keeps every one of 20 concurrent updates to one webhook, and answers each', async () => {
    const { id } = await (await create({ endpoint: 'https://hooks.example.com/race', events: ['email.sent'] })).json();
    const events = ['email.sent', 'email.delivered', 'email.bounced', 'email.failed'];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => server.request(`/webhooks/${id}`, { method: 'PATCH', ...json({ events: [events[i % 4]], status: i % 2 ? 'enabled' : 'disabled' }) })),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
    const got = await (await server.request(`/webhooks/${id}`)).json();
    expect(events).toContain(got.events[0]);
  });
});
