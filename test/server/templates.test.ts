// Templates over HTTP beyond create and publish: the list, newest first and paged; updating the draft
// (a field, several, null clearing one, a taken alias refused) while sends keep the published version
// until the next publish; and deleting, after which emails sent from the template stay as they were.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

describe.each(backends)('templates on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await server.request(path, { method, ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  }
  const create = async (name: string, extra: Record<string, unknown> = {}) => (await call('POST', '/templates', { name, html: `<p>${name}</p>`, ...extra })).body.id as string;

  it('lists templates newest first, without their content, a page at a time', async () => {
    const ids = [await create('one'), await create('two'), await create('three')];
    const all = await call('GET', '/templates');
    expect(all.status).toBe(200);
    expect(all.body.data.slice(0, 3).map((t: { id: string }) => t.id)).toEqual([...ids].reverse());
    expect(all.body.data[0]).toEqual({ object: 'template', id: ids[2], name: 'three', alias: null, status: 'draft', created_at: expect.any(String), updated_at: expect.any(String), published_at: null });
    const page = await call('GET', '/templates?limit=2');
    expect([page.body.has_more, page.body.data.length]).toEqual([true, 2]);
    const next = await call('GET', `/templates?limit=2&after=${page.body.data[1].id}`);
    expect(next.body.data[0].id).toBe(ids[0]);
    expect((await call('GET', '/templates?after=0d3c0a5e-1b7a-4c11-9e55-8c3f1f3f0e2a')).status).toBe(422);
  });

  it('updates the draft while sends keep the published version until it is published again', async () => {
    const id = await create('welcome', { alias: `welcome-${backend}`, subject: 'Hi {{{NAME|there}}}', from: 'hello@acme.dev', variables: [{ key: 'NAME', type: 'string' }] });
    const unpublished = async () => (await call('GET', `/templates/${id}`)).body.has_unpublished_versions;
    expect(await unpublished()).toBe(false); // a draft never published has no published version to differ from
    await call('POST', `/templates/${id}/publish`);
    expect(await unpublished()).toBe(false);
    expect(await call('PATCH', `/templates/welcome-${backend}`, { subject: 'Hello {{{NAME|there}}}', html: '<p>New</p>' })).toEqual({ status: 200, body: { object: 'template', id } });
    const got = (await call('GET', `/templates/${id}`)).body;
    // The draft is shown, and said to differ from what sends use.
    expect([got.subject, got.html, got.status, got.has_unpublished_versions]).toEqual(['Hello {{{NAME|there}}}', '<p>New</p>', 'published', true]);
    const send = async () => (await call('POST', '/emails', { to: 'ann@example.com', template: { id, variables: { NAME: 'Ann' } } })).body.id as string;
    expect((await call('GET', `/emails/${await send()}`)).body).toMatchObject({ subject: 'Hi Ann', html: '<p>welcome</p>' });
    await call('POST', `/templates/${id}/publish`);
    expect(await unpublished()).toBe(false);
    expect((await call('GET', `/emails/${await send()}`)).body).toMatchObject({ subject: 'Hello Ann', html: '<p>New</p>' });
    // A change that puts back what was published leaves nothing unpublished.
    await call('PATCH', `/templates/${id}`, { html: '<p>Newer</p>' });
    expect(await unpublished()).toBe(true);
    await call('PATCH', `/templates/${id}`, { html: '<p>New</p>' });
    expect(await unpublished()).toBe(false);
  });

  it('clears an optional field with null, refuses a taken alias, a bad address and an unknown template', async () => {
    const id = await create('clearing', { subject: 'S', text: 'T', alias: `clearing-${backend}` });
    await create('other', { alias: `taken-${backend}` });
    expect((await call('PATCH', `/templates/${id}`, { subject: null, text: null, alias: null })).status).toBe(200);
    expect((await call('GET', `/templates/${id}`)).body).toMatchObject({ subject: null, text: null, alias: null });
    expect(await call('PATCH', `/templates/${id}`, { alias: `taken-${backend}` })).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `A template with the alias \`taken-${backend}\` already exists.` } });
    expect((await call('PATCH', `/templates/${id}`, { from: 'not an address' })).status).toBe(422);
    expect((await call('PATCH', `/templates/${id}`, {})).status).toBe(422);
    expect((await call('PATCH', '/templates/no-such-template', { name: 'x' })).status).toBe(404);
  });

  it('refuses an alias in the form of an id: it would stand for that template once it was deleted', async () => {
    const other = await create('holder');
    const id = await create('aliased');
    const refused = { status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The `alias` must be 1 to 64 lower-case ASCII letters, digits, underscores or dashes, starting with a letter or digit, and not in the form of an id.' } };
    expect(await call('POST', '/templates', { name: 'n', html: '<p>x</p>', alias: other })).toEqual(refused);
    expect(await call('PATCH', `/templates/${id}`, { alias: other })).toEqual(refused);
    expect((await call('PATCH', `/templates/${id}`, { alias: `${other}-v2` })).status).toBe(200);
    expect((await call('GET', `/templates/${other}`)).body.name).toBe('holder');
  });

  it("refuses a fallback that is not of its variable's type, as the same value given at send is refused", async () => {
    const mistyped = (key: string, type: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `The \`fallback_value\` of the template variable \`${key}\` must be a ${type}, as its \`type\` says.` } });
    const numberWithText = [{ key: 'COUNT', type: 'number', fallback_value: 'not a number' }];
    expect(await call('POST', '/templates', { name: 'n', html: '<p>{{{COUNT}}}</p>', variables: numberWithText })).toEqual(mistyped('COUNT', 'number'));
    const id = await create('typed', { variables: [{ key: 'NAME', type: 'string', fallback_value: 'there' }, { key: 'COUNT', type: 'number', fallback_value: 3 }] });
    expect(await call('PATCH', `/templates/${id}`, { variables: [{ key: 'NAME', type: 'string', fallback_value: 5 }] })).toEqual(mistyped('NAME', 'string'));
    expect(await call('PATCH', `/templates/${id}`, { variables: numberWithText })).toEqual(mistyped('COUNT', 'number'));
    expect((await call('GET', `/templates/${id}`)).body.variables).toEqual([{ key: 'NAME', type: 'string', fallback_value: 'there' }, { key: 'COUNT', type: 'number', fallback_value: 3 }]);
    expect((await call('PATCH', `/templates/${id}`, { variables: [{ key: 'COUNT', type: 'number', fallback_value: null }] })).status).toBe(200);
  });

  it('deletes a template; an email sent from it stays as it was', async () => {
    const id = await create('short-lived', { subject: 'Bye', from: 'hello@acme.dev' });
    await call('POST', `/templates/${id}/publish`);
    const email = (await call('POST', '/emails', { to: 'ann@example.com', template: { id } })).body.id;
    expect(await call('DELETE', `/templates/${id}`)).toEqual({ status: 200, body: { object: 'template', id, deleted: true } });
    expect((await call('GET', `/templates/${id}`)).status).toBe(404);
    expect((await call('DELETE', `/templates/${id}`)).status).toBe(404);
    expect((await call('GET', `/emails/${email}`)).body).toMatchObject({ subject: 'Bye', html: '<p>short-lived</p>' });
  });
});
