// Segments, a contact's memberships, a segment's contacts, and the legacy audiences, over HTTP on
// SQLite and PostgreSQL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContactRecord } from '../../server/store/contacts.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const NOWHERE = '00000000-0000-4000-8000-000000000000';
const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe.each(backends)('segments on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await server.request(path, { method, headers: { 'content-type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  }
  const segment = async (name = 'Readers') => (await call('POST', '/segments', { name })).body.id as string;
  const contact = async (email: string, extra: object = {}) => (await call('POST', '/contacts', { email, ...extra })).body.id as string;
  const rows = (table: 'segment_contacts' | 'contact_topics', column: string, id: string) =>
    server.store.database.db.selectFrom(table).selectAll().where(column as never, '=', id as never).execute();

  it('creates, retrieves, lists, renames and deletes a segment', async () => {
    const created = await call('POST', '/segments', { name: 'Newsletter' });
    expect(created).toEqual({ status: 201, body: { object: 'segment', id: expect.any(String), name: 'Newsletter' } });
    const id = created.body.id;
    expect(await call('GET', `/segments/${id}`)).toEqual({ status: 200, body: { object: 'segment', id, name: 'Newsletter', created_at: timestamp } });
    expect((await call('GET', '/segments')).body.data).toContainEqual({ object: 'segment', id, name: 'Newsletter', created_at: timestamp });
    expect(await call('PATCH', `/segments/${id}`, { name: 'Monthly' })).toEqual({ status: 200, body: { object: 'segment', id } });
    expect((await call('GET', `/segments/${id}`)).body.name).toBe('Monthly');
    expect(await call('DELETE', `/segments/${id}`)).toEqual({ status: 200, body: { object: 'segment', id, deleted: true } });
    expect((await call('GET', `/segments/${id}`)).status).toBe(404);
  });

  it('answers 404 for an unknown segment on every operation, and 422 for an id that is not one', async () => {
    const notFound = { statusCode: 404, name: 'not_found', message: 'Segment not found' };
    for (const [method, path, body] of [['GET', ''], ['PATCH', '', { name: 'x' }], ['DELETE', ''], ['GET', '/contacts']] as const) {
      expect(await call(method, `/segments/${NOWHERE}${path}`, body), `${method} ${path}`).toEqual({ status: 404, body: notFound });
      const malformed = await call(method, `/segments/someone@example.com${path}`, body);
      expect(malformed, `${method} ${path}`).toMatchObject({ status: 422, body: { name: 'invalid_parameter', message: 'The `segment_id` must be a valid UUID.' } });
    }
  });

  it('refuses a name that is missing, empty, too long or holds NUL, with 422 naming it', async () => {
    expect(await call('POST', '/segments', {})).toMatchObject({ status: 422, body: { name: 'missing_required_field', message: 'Missing `name` field.' } });
    for (const name of ['', 'x'.repeat(257), 'a\u0000b', 7]) {
      const { status, body } = await call('POST', '/segments', { name });
      expect(status, JSON.stringify(name)).toBe(422);
      expect(body.message).toContain('`name`');
    }
    const id = await segment();
    expect((await call('PATCH', `/segments/${id}`, { name: '' })).status).toBe(422);
    expect((await call('PATCH', `/segments/${id}`, {})).body).toMatchObject({ name: 'missing_required_field' });
  });

  describe('paging', () => {
    let expected: string[];
    beforeAll(async () => {
      // Segments in groups of four sharing one created_at, so that the id tiebreak is exercised.
      const base = Date.parse('2020-01-01T00:00:00.000Z');
      const records = Array.from({ length: 30 }, (_, i) => ({ id: randomUUID(), name: `s${i}`, created_at: new Date(base + Math.floor(i / 4) * 1000).toISOString() }));
      await server.store.database.db.deleteFrom('segment_contacts').execute();
      await server.store.database.db.deleteFrom('segments').execute();
      await server.store.database.db.insertInto('segments').values(records).execute();
      expected = records.sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1)).map((r) => r.id);
    });

    it.each([1, 7, 100])('walks forward and backward with limit %i, has_more exact on every page', async (limit) => {
      const forward: string[] = [];
      for (let after: string | undefined; ; ) {
        const { body } = await call('GET', `/segments?limit=${limit}${after ? `&after=${after}` : ''}`);
        forward.push(...body.data.map((s: { id: string }) => s.id));
        expect(body.has_more).toBe(forward.length < expected.length);
        if (!body.has_more) break;
        after = forward.at(-1);
      }
      expect(forward).toEqual(expected);
      const backward: string[] = [];
      for (let before = expected.at(-1)!; ; ) {
        const { body } = await call('GET', `/segments?limit=${limit}&before=${before}`);
        backward.unshift(...body.data.map((s: { id: string }) => s.id));
        expect(body.has_more).toBe(backward.length < expected.length - 1);
        if (!body.has_more) break;
        before = backward[0]!;
      }
      expect(backward).toEqual(expected.slice(0, -1));
    });

    it('without limit lists all beyond the cursor; refuses both cursors, unknown cursors and a bad limit', async () => {
      expect((await call('GET', '/segments')).body).toEqual({ object: 'list', has_more: false, data: expect.any(Array) });
      expect((await call('GET', '/segments')).body.data.map((s: { id: string }) => s.id)).toEqual(expected);
      expect((await call('GET', `/segments?after=${expected[25]}`)).body.data.map((s: { id: string }) => s.id)).toEqual(expected.slice(26));
      expect(await call('GET', `/segments?after=${expected[0]}&before=${expected[3]}`)).toMatchObject({ status: 422, body: { message: 'Only one of `after` or `before` may be given.' } });
      expect(await call('GET', `/segments?limit=2&after=${NOWHERE}`)).toMatchObject({ status: 422, body: { name: 'validation_error', message: 'The `after` segment does not exist.' } });
      expect(await call('GET', '/segments?limit=0')).toMatchObject({ status: 422, body: { message: 'The `limit` must be between 1 and 100.' } });
    });
  });

  it('adds a contact by id or by email, idempotently, lists its segments, and removes it', async () => {
    const [first, second] = [await segment('First'), await segment('Second')];
    const id = await contact('Member@Example.com');
    const added = await call('POST', `/contacts/${id}/segments/${first}`);
    expect(added).toEqual({ status: 200, body: { object: 'contact_segment', id: first, contact_id: id, segment_id: first } });
    expect(await call('POST', `/contacts/${id}/segments/${first}`)).toEqual(added);
    expect(await call('POST', `/contacts/member@EXAMPLE.com/segments/${second}`)).toEqual({ status: 200, body: { object: 'contact_segment', id: second, contact_id: id, segment_id: second } });
    expect(await rows('segment_contacts', 'contact_id', id)).toHaveLength(2);

    const listed = await call('GET', `/contacts/${id}/segments`);
    expect(listed.body).toEqual({
      object: 'list',
      has_more: false,
      data: expect.arrayContaining([
        { id: first, name: 'First', created_at: timestamp },
        { id: second, name: 'Second', created_at: timestamp },
      ]),
    });
    const [newest, oldest] = listed.body.data;
    expect(newest.created_at >= oldest.created_at).toBe(true);
    const page = await call('GET', `/contacts/member@example.com/segments?limit=1`);
    expect(page.body).toEqual({ object: 'list', has_more: true, data: [newest] });
    expect((await call('GET', `/contacts/${id}/segments?limit=1&after=${newest.id}`)).body).toEqual({ object: 'list', has_more: false, data: [oldest] });
    expect((await call('GET', `/contacts/${id}/segments?limit=1&before=${oldest.id}`)).body).toEqual({ object: 'list', has_more: false, data: [newest] });
    const stranger = await segment('Stranger');
    expect(await call('GET', `/contacts/${id}/segments?after=${stranger}`)).toMatchObject({ status: 422, body: { message: 'The `after` segment of this contact does not exist.' } });

    expect(await call('DELETE', `/contacts/member@example.com/segments/${first}`)).toEqual({ status: 200, body: { object: 'contact_segment', id: first, contact_id: id, segment_id: first, deleted: true } });
    expect(await call('DELETE', `/contacts/${id}/segments/${first}`)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Segment membership not found' } });
    expect((await call('GET', `/contacts/${id}/segments`)).body.data.map((s: { id: string }) => s.id)).toEqual([second]);
  });

  it('lists a segment\'s contacts from /contacts with segment_id, as Resend filters them, as its own list does', async () => {
    const group = await segment('Filtered');
    const members = [await contact('f1@example.com'), await contact('f2@example.com'), await contact('f3@example.com')];
    await contact('outsider@example.com');
    for (const id of members) await call('POST', `/contacts/${id}/segments/${group}`);
    const own = (await call('GET', `/segments/${group}/contacts`)).body;
    const filtered = await call('GET', `/contacts?segment_id=${group}`);
    expect(filtered).toEqual({ status: 200, body: own });
    expect(own.data.map((c: { id: string }) => c.id).sort()).toEqual([...members].sort());
    const first = await call('GET', `/contacts?segment_id=${group}&limit=2`);
    expect(first.body).toEqual((await call('GET', `/segments/${group}/contacts?limit=2`)).body);
    expect(first.body.has_more).toBe(true);
    const rest = await call('GET', `/contacts?segment_id=${group}&limit=2&after=${first.body.data[1].id}`);
    expect(rest.body).toMatchObject({ has_more: false, data: [own.data[2]] });
    expect(await call('GET', `/contacts?segment_id=${NOWHERE}`)).toMatchObject({ status: 404, body: { message: 'Segment not found' } });
    expect(await call('GET', '/contacts?segment_id=nope')).toMatchObject({ status: 422 });
  });

  it('answers 404 naming what is unknown, and 422 for ids of the wrong kind', async () => {
    const id = await contact('known@example.com');
    const seg = await segment();
    const missing = (what: string) => ({ status: 404, body: { statusCode: 404, name: 'not_found', message: `${what} not found` } });
    for (const method of ['POST', 'DELETE']) {
      expect(await call(method, `/contacts/${NOWHERE}/segments/${seg}`)).toEqual(missing('Contact'));
      expect(await call(method, `/contacts/nobody@example.com/segments/${seg}`)).toEqual(missing('Contact'));
      expect(await call(method, `/contacts/${id}/segments/${NOWHERE}`)).toEqual(missing('Segment'));
      // A contact's id where a segment's belongs names no segment.
      expect(await call(method, `/contacts/${id}/segments/${id}`)).toEqual(missing('Segment'));
      expect(await call(method, `/contacts/${id}/segments/known@example.com`)).toMatchObject({ status: 422, body: { name: 'invalid_parameter' } });
      expect(await call(method, `/contacts/not-an-id/segments/${seg}`)).toMatchObject({ status: 422, body: { name: 'invalid_parameter' } });
    }
    expect(await call('GET', `/contacts/${NOWHERE}/segments`)).toEqual(missing('Contact'));
    expect(await rows('segment_contacts', 'segment_id', seg)).toEqual([]);
  });

  it('keeps one membership for 20 concurrent adds of the same contact', async () => {
    const [seg, id] = [await segment(), await contact('racer@example.com')];
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => call('POST', `/contacts/${i % 2 ? id : 'racer@example.com'}/segments/${seg}`)));
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(await rows('segment_contacts', 'segment_id', seg)).toHaveLength(1);
  });

  it('leaves no membership behind when a contact or a segment is deleted while contacts are added', async () => {
    const seg = await segment();
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => contact(`gone${i}@example.com`)));
    const adds = ids.map((id) => call('POST', `/contacts/${id}/segments/${seg}`));
    const deletes = ids.map((id) => call('DELETE', `/contacts/${id}`));
    const answers = await Promise.all([...adds, ...deletes]);
    expect(answers.every((a) => a.status === 200 || (a.status === 404 && a.body.message === 'Contact not found'))).toBe(true);
    expect(await rows('segment_contacts', 'segment_id', seg)).toEqual([]);

    const doomed = await segment();
    const others = await Promise.all(Array.from({ length: 10 }, (_, i) => contact(`stay${i}@example.com`)));
    const racing = await Promise.all([...others.map((id) => call('POST', `/contacts/${id}/segments/${doomed}`)), call('DELETE', `/segments/${doomed}`)]);
    expect(racing.every((a) => a.status === 200 || (a.status === 404 && a.body.message === 'Segment not found'))).toBe(true);
    expect(await rows('segment_contacts', 'segment_id', doomed)).toEqual([]);
  });

  it('deleting a segment removes its memberships and keeps its contacts; deleting a contact removes its memberships and topic choices', async () => {
    const [kept, doomed] = [await segment('Kept'), await segment('Doomed')];
    const topic = (await call('POST', '/topics', { name: 'News', default_subscription: 'opt_in' })).body.id;
    const id = await contact('leaver@example.com', { segments: [kept, { id: doomed }], topics: [{ id: topic, subscription: 'opt_out' }] });
    expect(await rows('segment_contacts', 'contact_id', id)).toHaveLength(2);
    await call('DELETE', `/segments/${doomed}`);
    expect(await rows('segment_contacts', 'segment_id', doomed)).toEqual([]);
    expect((await call('GET', `/contacts/${id}/segments`)).body.data.map((s: { id: string }) => s.id)).toEqual([kept]);
    expect((await call('GET', `/contacts/${id}`)).status).toBe(200);

    expect(await rows('contact_topics', 'contact_id', id)).toHaveLength(1);
    expect((await call('DELETE', `/contacts/${id}`)).status).toBe(200);
    expect(await rows('segment_contacts', 'contact_id', id)).toEqual([]);
    expect(await rows('contact_topics', 'contact_id', id)).toEqual([]);
  });

  it('creates a contact in segments given as ids or as {id}, and refuses an unknown one, creating nothing', async () => {
    const [a, b] = [await segment('A'), await segment('B')];
    const id = await contact('joiner@example.com', { segments: [a, { id: b }, a] });
    expect((await call('GET', `/contacts/${id}/segments`)).body.data.map((s: { id: string }) => s.id).sort()).toEqual([a, b].sort());

    const refused = await call('POST', '/contacts', { email: 'never@example.com', segments: [a, NOWHERE] });
    expect(refused).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `The segment \`${NOWHERE}\` in \`segments\` does not exist.` } });
    expect((await call('GET', '/contacts/never@example.com')).status).toBe(404);
    expect(await rows('segment_contacts', 'segment_id', a)).toHaveLength(1);
    // Either shape of a segment reference is judged as itself, naming the field at fault.
    expect((await call('POST', '/contacts', { email: 'never@example.com', segments: ['not-a-uuid'] })).body.message).toBe('The `segments.0` must be a valid UUID.');
    expect((await call('POST', '/contacts', { email: 'never@example.com', segments: [a, { id: 'nope' }] })).body.message).toBe('The `segments.1.id` must be a valid UUID.');
    expect((await call('POST', '/contacts', { email: 'never@example.com', segments: [{}] })).body).toMatchObject({ name: 'missing_required_field', message: 'Missing `segments.0.id` field.' });

    // An email that exists already: 200 with the same id, and its memberships unchanged too.
    const again = await call('POST', '/contacts', { email: 'JOINER@example.com', segments: [await segment('C')] });
    expect(again).toEqual({ status: 200, body: { object: 'contact', id } });
    expect((await call('GET', `/contacts/${id}/segments`)).body.data).toHaveLength(2);
  });

  describe('contacts of a segment', () => {
    let seg: string;
    let members: string[];
    beforeAll(async () => {
      seg = await segment('Members');
      // Contacts in groups of five sharing one created_at; every third one joins the segment.
      const base = Date.parse('2021-01-01T00:00:00.000Z');
      const records: ContactRecord[] = Array.from({ length: 120 }, (_, i) => {
        const at = new Date(base + Math.floor(i / 5) * 1000).toISOString();
        return { id: randomUUID(), email: `m${i}@members.dev`, email_key: `m${i}@members.dev`, first_name: null, last_name: null, unsubscribed: 0, properties: '{}', created_at: at, updated_at: at };
      });
      await server.store.database.db.insertInto('contacts').values(records).execute();
      const joining = records.filter((_, i) => i % 3 === 0);
      for (const record of joining) expect((await call('POST', `/contacts/${record.id}/segments/${seg}`)).status).toBe(200);
      members = joining.sort((x, y) => (x.created_at === y.created_at ? (x.id < y.id ? 1 : -1) : x.created_at < y.created_at ? 1 : -1)).map((r) => r.id);
    });

    it.each([1, 6, 100])('pages forward and backward with limit %i, has_more exact', async (limit) => {
      const forward: string[] = [];
      for (let after: string | undefined; ; ) {
        const { body } = await call('GET', `/segments/${seg}/contacts?limit=${limit}${after ? `&after=${after}` : ''}`);
        forward.push(...body.data.map((c: { id: string }) => c.id));
        expect(body.has_more).toBe(forward.length < members.length);
        if (!body.has_more) break;
        after = forward.at(-1);
      }
      expect(forward).toEqual(members);
      const backward: string[] = [];
      for (let before = members.at(-1)!; ; ) {
        const { body } = await call('GET', `/segments/${seg}/contacts?limit=${limit}&before=${before}`);
        backward.unshift(...body.data.map((c: { id: string }) => c.id));
        expect(body.has_more).toBe(backward.length < members.length - 1);
        if (!body.has_more) break;
        before = backward[0]!;
      }
      expect(backward).toEqual(members.slice(0, -1));
    });

    it('streams every member without limit, as contacts, and takes a member as a cursor', async () => {
      const whole = await call('GET', `/segments/${seg}/contacts`);
      expect(whole.body.has_more).toBe(false);
      expect(whole.body.data.map((c: { id: string }) => c.id)).toEqual(members);
      expect(whole.body.data[0]).toEqual({ object: 'contact', id: members[0], email: expect.stringMatching(/@members\.dev$/), created_at: timestamp, unsubscribed: false, properties: {} });
      expect((await call('GET', `/segments/${seg}/contacts?after=${members[30]}`)).body.data.map((c: { id: string }) => c.id)).toEqual(members.slice(31));
      expect(await call('GET', `/segments/${seg}/contacts?after=${NOWHERE}`)).toMatchObject({ status: 422, body: { message: 'The `after` contact of this segment does not exist.' } });
      expect(await call('GET', `/segments/${seg}/contacts?limit=5&before=${NOWHERE}`)).toMatchObject({ status: 422, body: { message: 'The `before` contact of this segment does not exist.' } });
    });

    it('refuses as a cursor a contact that is not a member, paged or streamed, under either name', async () => {
      // A contact outside the segment has a place in the same order, but it is no item of this list.
      const outsider = await contact('outsider@members.dev');
      const audience = async (path: string) => (await call('GET', path.replace('/segments/', '/audiences/'))).body.message;
      for (const query of [`limit=100&after=${outsider}`, `after=${outsider}`, `limit=5&before=${outsider}`, `before=${outsider}`]) {
        const parameter = query.includes('after') ? 'after' : 'before';
        const refused = await call('GET', `/segments/${seg}/contacts?${query}`);
        expect(refused, query).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `The \`${parameter}\` contact of this segment does not exist.` } });
        expect(await audience(`/segments/${seg}/contacts?${query}`)).toBe(`The \`${parameter}\` contact of this audience does not exist.`);
      }
      // A member of another segment is not one of this one either.
      const other = await segment('Other');
      expect((await call('POST', `/contacts/${outsider}/segments/${other}`)).status).toBe(200);
      expect((await call('GET', `/segments/${seg}/contacts?limit=5&after=${outsider}`)).status).toBe(422);
      expect((await call('GET', `/segments/${other}/contacts?limit=5&after=${outsider}`)).body).toEqual({ object: 'list', has_more: false, data: [] });
    });
  });

  describe('legacy audiences', () => {
    it('are segments under another name', async () => {
      const created = await call('POST', '/audiences', { name: 'Legacy' });
      expect(created).toEqual({ status: 201, body: { object: 'audience', id: expect.any(String), name: 'Legacy' } });
      const id = created.body.id;
      expect(await call('GET', `/audiences/${id}`)).toEqual({ status: 200, body: { object: 'audience', id, name: 'Legacy', created_at: timestamp } });
      expect((await call('GET', `/segments/${id}`)).body).toMatchObject({ object: 'segment', name: 'Legacy' });
      expect((await call('GET', '/audiences?limit=100')).body.data).toContainEqual({ object: 'audience', id, name: 'Legacy', created_at: timestamp });
      expect(await call('DELETE', `/audiences/${id}`)).toEqual({ status: 200, body: { object: 'audience', id, deleted: true } });
      expect(await call('GET', `/audiences/${id}`)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Audience not found' } });
      expect((await call('DELETE', `/audiences/${id}`)).status).toBe(404);
    });

    it('create, find, change and delete contacts that are in the audience, and only those', async () => {
      const audience = (await call('POST', '/audiences', { name: 'Old list' })).body.id;
      const created = await call('POST', `/audiences/${audience}/contacts`, { email: 'old@example.com', first_name: 'Old' });
      expect(created).toEqual({ status: 201, body: { object: 'contact', id: expect.any(String) } });
      const id = created.body.id;
      // An existing contact is found, left unchanged, and joins the audience.
      const outside = await contact('outside@example.com', { first_name: 'Out' });
      expect(await call('POST', `/audiences/${audience}/contacts`, { email: 'OUTSIDE@example.com', first_name: 'Changed' })).toEqual({ status: 200, body: { object: 'contact', id: outside } });
      expect((await call('GET', `/contacts/${outside}`)).body.first_name).toBe('Out');
      expect((await call('GET', `/audiences/${audience}/contacts`)).body.data.map((c: { id: string }) => c.id).sort()).toEqual([id, outside].sort());

      expect((await call('GET', `/audiences/${audience}/contacts/${id}`)).body).toMatchObject({ object: 'contact', id, email: 'old@example.com', first_name: 'Old' });
      expect((await call('GET', `/audiences/${audience}/contacts/OLD@example.com`)).body.id).toBe(id);
      expect(await call('PATCH', `/audiences/${audience}/contacts/${id}`, { unsubscribed: true })).toEqual({ status: 200, body: { object: 'contact', id } });
      expect((await call('GET', `/contacts/${id}`)).body.unsubscribed).toBe(true);

      const stranger = await contact('stranger@example.com');
      const notMember = { status: 404, body: { statusCode: 404, name: 'not_found', message: 'Contact not found' } };
      for (const [method, body] of [['GET'], ['PATCH', { first_name: 'x' }], ['DELETE']] as const) {
        expect(await call(method, `/audiences/${audience}/contacts/${stranger}`, body)).toEqual(notMember);
        expect(await call(method, `/audiences/${NOWHERE}/contacts/${id}`, body)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Audience not found' } });
      }
      expect((await call('GET', `/contacts/${stranger}`)).body.first_name).toBeUndefined();

      expect(await call('DELETE', `/audiences/${audience}/contacts/${id}`)).toEqual({ status: 200, body: { object: 'contact', contact: id, deleted: true } });
      expect((await call('GET', `/contacts/${id}`)).status).toBe(404);
      expect(await call('POST', `/audiences/${NOWHERE}/contacts`, { email: 'lost@example.com' })).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Audience not found' } });
      expect((await call('GET', '/contacts/lost@example.com')).status).toBe(404);
      expect((await call('GET', `/audiences/${NOWHERE}/contacts`)).body.message).toBe('Audience not found');
      expect((await call('POST', `/audiences/${audience}/contacts`, { email: 'x@example.com', segments: [audience] })).status).toBe(422);
    });
  });
});
