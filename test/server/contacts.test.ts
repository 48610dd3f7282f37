// GET /contacts and the contact operations, over HTTP with the client, on SQLite and PostgreSQL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContactRecord } from '../../server/store/contacts.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

/** Contacts in groups of five sharing one created_at, so that the id tiebreak is exercised. */
function contactRecords(count: number, prefix: string): ContactRecord[] {
  const base = Date.parse('2026-01-01T00:00:00.000Z');
  return Array.from({ length: count }, (_, i) => {
    const at = new Date(base + Math.floor(i / 5) * 1000).toISOString();
    const email = `${prefix}${i}@example.com`;
    return { id: randomUUID(), email, email_key: email, first_name: `First${i}`, last_name: null, unsubscribed: i % 3 === 0 ? 1 : 0, properties: JSON.stringify({ n: String(i) }), created_at: at, updated_at: at };
  });
}

const newestFirst = (records: ContactRecord[]) =>
  [...records].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1)).map((r) => r.id);

describe.each(backends)('contacts on %s', (backend) => {
  let server: TestServer;
  let expected: string[];

  beforeAll(async () => {
    server = await startTestServer(backend);
    const records = contactRecords(250, 'walk');
    await server.store.database.db.insertInto('contacts').values(records).execute();
    expected = newestFirst(records);
  });
  afterAll(() => server.close());

  async function page(query: { limit?: number; after?: string; before?: string }) {
    const { data, error, response } = await server.client.GET('/contacts', { params: { query } });
    expect(error, JSON.stringify(error)).toBeUndefined();
    expect(response.status).toBe(200);
    return data!;
  }

  it.each([1, 7, 100])('walks forward with limit %i, newest first, has_more exact on every page', async (limit) => {
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const body = await page({ limit, ...(after && { after }) });
      expect(body.object).toBe('list');
      expect(body.data.length).toBeLessThanOrEqual(limit);
      seen.push(...body.data.map((c) => c.id));
      expect(body.has_more).toBe(seen.length < expected.length);
      if (!body.has_more) break;
      after = body.data.at(-1)!.id;
    }
    expect(seen).toEqual(expected);
  });

  it.each([1, 7, 100])('walks backward with limit %i from the oldest contact, has_more exact on every page', async (limit) => {
    const seen: string[] = [];
    let before = expected.at(-1)!;
    for (;;) {
      const body = await page({ limit, before });
      expect(body.data.length).toBeLessThanOrEqual(limit);
      seen.unshift(...body.data.map((c) => c.id));
      expect(body.has_more).toBe(seen.length < expected.length - 1);
      if (!body.has_more) break;
      before = body.data[0]!.id;
    }
    expect(seen).toEqual(expected.slice(0, -1));
  });

  it('cursors are exclusive, and equal timestamps keep a stable order', async () => {
    const mid = expected[123]!;
    expect((await page({ limit: 3, after: mid })).data.map((c) => c.id)).toEqual(expected.slice(124, 127));
    expect((await page({ limit: 3, before: mid })).data.map((c) => c.id)).toEqual(expected.slice(120, 123));
    expect((await page({ limit: 1, after: expected.at(-1)! }))).toEqual({ object: 'list', has_more: false, data: [] });
    expect((await page({ limit: 1, before: expected[0]! }))).toEqual({ object: 'list', has_more: false, data: [] });
  });

  it('takes an id in upper case, in the path and as a cursor, for the same contact', async () => {
    const mid = expected[123]!;
    const upper = mid.toUpperCase();
    expect((await page({ limit: 3, after: upper })).data.map((c) => c.id)).toEqual(expected.slice(124, 127));
    expect((await page({ limit: 3, before: upper })).data.map((c) => c.id)).toEqual(expected.slice(120, 123));
    const { data, response } = await server.client.GET('/contacts/{contact_id}', { params: { path: { contact_id: upper } } });
    expect(response.status).toBe(200);
    expect(data!.id).toBe(mid);
  });

  it('without limit returns every contact in one response, has_more false', async () => {
    const body = await page({});
    expect(body.has_more).toBe(false);
    expect(body.data.map((c) => c.id)).toEqual(expected);
    expect(body.data[0]).toMatchObject({ object: 'contact', unsubscribed: expect.any(Boolean), properties: { n: expect.any(String) } });
  });

  it('without limit but with a cursor returns everything beyond it', async () => {
    expect((await page({ after: expected[239]! })).data.map((c) => c.id)).toEqual(expected.slice(240));
    expect((await page({ before: expected[5]! })).data.map((c) => c.id)).toEqual(expected.slice(0, 5));
  });

  it.each([
    [{ limit: 0 }, 'The `limit` must be between 1 and 100.'],
    [{ limit: 101 }, 'The `limit` must be between 1 and 100.'],
    [{ limit: 2.5 }, 'The `limit` must be an integer.'],
  ])('rejects %j with 422', async (query, message) => {
    const { error, response } = await server.client.GET('/contacts', { params: { query: query as { limit: number } } });
    expect(response.status).toBe(422);
    expect(error).toEqual({ statusCode: 422, name: 'validation_error', message });
  });

  it('rejects both cursors at once, and cursors that name no contact, naming the parameter', async () => {
    const both = await server.client.GET('/contacts', { params: { query: { limit: 5, after: expected[0]!, before: expected[9]! } } });
    expect(both.response.status).toBe(422);
    expect(both.error).toEqual({ statusCode: 422, name: 'validation_error', message: 'Only one of `after` or `before` may be given.' });
    for (const parameter of ['after', 'before'] as const) {
      for (const limit of [5, undefined]) {
        const { error } = await server.client.GET('/contacts', { params: { query: { limit, [parameter]: randomUUID() } } });
        expect(error).toEqual({ statusCode: 422, name: 'validation_error', message: `The \`${parameter}\` contact does not exist.` });
      }
      const malformed = await server.client.GET('/contacts', { params: { query: { [parameter]: 'not-an-id' } } });
      expect(malformed.error).toMatchObject({ statusCode: 422, message: `The \`${parameter}\` must be a valid UUID.` });
    }
  });
});

describe.each(backends)('contact operations on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  it('creates a contact (201), and answers 200 with the same id, unchanged, for the same email in any case', async () => {
    const created = await server.client.POST('/contacts', {
      body: { email: 'Steve.Wozniak@Gmail.com', first_name: 'Steve', last_name: 'Wozniak', properties: { company: 'Apple' } },
    });
    expect(created.response.status).toBe(201);
    expect(created.data).toEqual({ object: 'contact', id: expect.any(String) });
    const again = await server.client.POST('/contacts', { body: { email: 'steve.wozniak@gmail.com', first_name: 'Other' } });
    expect(again.response.status).toBe(200);
    expect(again.data).toEqual(created.data);
    const { data } = await server.client.GET('/contacts/{contact_id}', { params: { path: { contact_id: created.data!.id } } });
    expect(data).toEqual({
      object: 'contact',
      id: created.data!.id,
      email: 'Steve.Wozniak@Gmail.com',
      first_name: 'Steve',
      last_name: 'Wozniak',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      unsubscribed: false,
      properties: { company: 'Apple' },
    });
  });

  it('finds a contact by email, updates it (merging properties, null clears a name), and deletes it', async () => {
    const { data: ref } = await server.client.POST('/contacts', { body: { email: 'ada@lovelace.dev', first_name: 'Ada', properties: { a: '1', b: '2' } } });
    const byEmail = await server.client.GET('/contacts/{contact_id}', { params: { path: { contact_id: 'ADA@lovelace.dev' } } });
    expect(byEmail.data?.id).toBe(ref!.id);

    const updated = await server.client.PATCH('/contacts/{contact_id}', {
      params: { path: { contact_id: ref!.id } },
      body: { first_name: null, unsubscribed: true, properties: { b: 'two', c: '3' } },
    });
    expect(updated.data).toEqual({ object: 'contact', id: ref!.id });
    const { data: after } = await server.client.GET('/contacts/{contact_id}', { params: { path: { contact_id: ref!.id } } });
    expect(after).toMatchObject({ unsubscribed: true, properties: { a: '1', b: 'two', c: '3' } });
    expect(after).not.toHaveProperty('first_name');

    const removed = await server.client.DELETE('/contacts/{contact_id}', { params: { path: { contact_id: ref!.id } } });
    expect(removed.data).toEqual({ object: 'contact', contact: ref!.id, deleted: true });
    const gone = await server.client.GET('/contacts/{contact_id}', { params: { path: { contact_id: ref!.id } } });
    expect(gone.response.status).toBe(404);
    expect(gone.error).toEqual({ statusCode: 404, name: 'not_found', message: 'Contact not found' });
  });

  it('changes a contact\'s address, found by it afterwards, and refuses one another contact has, in any case', async () => {
    const patch = (contact: string, body: object) => server.client.PATCH('/contacts/{contact_id}', { params: { path: { contact_id: contact } }, body });
    const get = (contact: string) => server.client.GET('/contacts/{contact_id}', { params: { path: { contact_id: contact } } });
    const { data: moving } = await server.client.POST('/contacts', { body: { email: `old-${backend}@example.com` } });
    await server.client.POST('/contacts', { body: { email: `Taken-${backend}@example.com` } });
    expect((await patch(`old-${backend}@example.com`, { email: `New-${backend}@example.com` })).data).toEqual({ object: 'contact', id: moving!.id });
    expect((await get(`new-${backend}@example.com`)).data).toMatchObject({ id: moving!.id, email: `New-${backend}@example.com` });
    expect((await get(`old-${backend}@example.com`)).response.status).toBe(404);
    // Its own address in another case is its own.
    expect((await patch(moving!.id, { email: `new-${backend}@EXAMPLE.com` })).response.status).toBe(200);
    const refused = await patch(moving!.id, { email: `taken-${backend}@example.com`, first_name: 'Kept out' });
    expect(refused.response.status).toBe(422);
    expect(refused.error).toEqual({ statusCode: 422, name: 'validation_error', message: `Another contact has the address \`taken-${backend}@example.com\`.` });
    expect((await get(moving!.id)).data).toMatchObject({ email: `new-${backend}@EXAMPLE.com` });
    expect((await get(moving!.id)).data).not.toHaveProperty('first_name');
    expect((await patch(moving!.id, { email: 'not an address' })).response.status).toBe(422);
    // Two contacts given one address at once: one gets it, the other is refused, never both.
    for (let round = 0; round < 5; round++) {
      const pair = await Promise.all([1, 2].map(async (n) => (await server.client.POST('/contacts', { body: { email: `race-${round}-${n}-${backend}@example.com` } })).data!.id));
      const answers = await Promise.all(pair.map((id) => patch(id, { email: `raced-${round}-${backend}@example.com` })));
      expect(answers.map((a) => a.response.status).sort(), `round ${round}`).toEqual([200, 422]);
    }
  });

  it('answers 404 for unknown contacts on every operation', async () => {
    const contact_id = randomUUID();
    const results = await Promise.all([
      server.client.GET('/contacts/{contact_id}', { params: { path: { contact_id } } }),
      server.client.PATCH('/contacts/{contact_id}', { params: { path: { contact_id } }, body: { unsubscribed: true } }),
      server.client.DELETE('/contacts/{contact_id}', { params: { path: { contact_id } } }),
    ]);
    for (const { error } of results) expect(error).toEqual({ statusCode: 404, name: 'not_found', message: 'Contact not found' });
  });

  it('rejects bad contact fields with 422 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{}, 'Missing `email` field.'],
      [{ email: 'not an address' }, 'The `email` must be a valid email address.'],
      [{ email: 'x@y.dev', properties: { plan: 3 } }, 'The `properties.plan` must be a string.'],
      [{ email: 'x@y.dev', nickname: 'x' }, 'The field `nickname` is not supported.'],
      // Addresses past RFC 5321's limits, which sending applies: stored, they could never be sent to.
      ...[`${'l'.repeat(65)}@example.com`, `x@${'d'.repeat(64)}.com`].map(
        (email): [unknown, string] => [{ email }, 'The `email` must be an address with at most 64 characters before the `@` and at most 63 in each dot-separated part of its domain.'],
      ),
    ];
    for (const [body, message] of cases) {
      const res = await server.request('/contacts', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ statusCode: 422, message });
    }
    for (const email of [`${'l'.repeat(64)}@example.com`, `x@${'d'.repeat(63)}.com`]) {
      const res = await server.request('/contacts', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email }) });
      expect(res.status, email).toBe(201);
    }
  });

  it('streams 10,000 contacts unpaginated, each one valid and in order', async () => {
    const records = contactRecords(10_000, 'bulk');
    for (let i = 0; i < records.length; i += 1000) {
      await server.store.database.db.insertInto('contacts').values(records.slice(i, i + 1000)).execute();
    }
    const res = await server.request('/contacts');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await res.json();
    expect(body.has_more).toBe(false);
    const bulk = body.data.filter((c: { email: string }) => c.email.startsWith('bulk'));
    expect(bulk.map((c: { id: string }) => c.id)).toEqual(newestFirst(records));
  });
});
