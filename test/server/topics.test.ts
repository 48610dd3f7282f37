// Topics and each contact's subscriptions to them, over HTTP on SQLite and PostgreSQL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const NOWHERE = '00000000-0000-4000-8000-000000000000';
const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe.each(backends)('topics on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await server.request(path, { method, headers: { 'content-type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  }
  const topic = async (name: string, default_subscription: 'opt_in' | 'opt_out' = 'opt_in', extra: object = {}) =>
    (await call('POST', '/topics', { name, default_subscription, ...extra })).body.id as string;
  const contact = async (email: string, extra: object = {}) => (await call('POST', '/contacts', { email, ...extra })).body.id as string;
  const choices = (contactId: string) => server.store.database.db.selectFrom('contact_topics').select(['topic_id', 'subscription']).where('contact_id', '=', contactId).execute();
  const subscriptions = async (contactId: string) =>
    Object.fromEntries((await call('GET', `/contacts/${contactId}/topics`)).body.data.map((t: { id: string; subscription: string }) => [t.id, t.subscription]));

  it('creates a topic (private, no description, unless given), retrieves, lists, updates and deletes it', async () => {
    const created = await call('POST', '/topics', { name: 'Product updates', default_subscription: 'opt_in' });
    expect(created).toEqual({ status: 201, body: { object: 'topic', id: expect.any(String) } });
    const id = created.body.id;
    const expected = { object: 'topic', id, name: 'Product updates', description: null, default_subscription: 'opt_in', visibility: 'private', created_at: timestamp };
    expect(await call('GET', `/topics/${id}`)).toEqual({ status: 200, body: expected });
    expect((await call('GET', '/topics')).body.data).toContainEqual(expected);

    expect(await call('PATCH', `/topics/${id}`, { name: 'Product news', description: 'Monthly.', visibility: 'public' })).toEqual({ status: 200, body: { object: 'topic', id } });
    expect((await call('GET', `/topics/${id}`)).body).toEqual({ ...expected, name: 'Product news', description: 'Monthly.', visibility: 'public' });
    // The SDK sends the id in the body too, and a description can be removed with null.
    expect((await call('PATCH', `/topics/${id}`, { id, description: null })).status).toBe(200);
    expect((await call('GET', `/topics/${id}`)).body).toMatchObject({ name: 'Product news', description: null, visibility: 'public' });

    const full = await call('POST', '/topics', { name: 'Events', description: 'Meetups near you.', default_subscription: 'opt_out', visibility: 'public' });
    expect((await call('GET', `/topics/${full.body.id}`)).body).toMatchObject({ description: 'Meetups near you.', default_subscription: 'opt_out', visibility: 'public' });

    expect(await call('DELETE', `/topics/${id}`)).toEqual({ status: 200, body: { object: 'topic', id, deleted: true } });
    expect(await call('GET', `/topics/${id}`)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Topic not found' } });
  });

  it('keeps default_subscription fixed and the body id equal to the path, naming the field', async () => {
    const id = await topic('Fixed', 'opt_out');
    const changed = await call('PATCH', `/topics/${id}`, { default_subscription: 'opt_in', name: 'Renamed' });
    expect(changed.status).toBe(422);
    expect(changed.body.message).toContain('`default_subscription`');
    expect((await call('PATCH', `/topics/${id}`, { default_subscription: 'opt_out' })).status).toBe(200);
    const other = await call('PATCH', `/topics/${id}`, { id: NOWHERE, name: 'Renamed' });
    expect(other).toMatchObject({ status: 422, body: { name: 'validation_error' } });
    expect(other.body.message).toContain('`id`');
    expect((await call('GET', `/topics/${id}`)).body).toMatchObject({ name: 'Fixed', default_subscription: 'opt_out' });
    expect(await call('PATCH', `/topics/${id}`, {})).toMatchObject({ status: 422 });
  });

  it('refuses bad fields with 422 naming them', async () => {
    const cases: [object, string][] = [
      [{ name: 'x' }, '`default_subscription`'],
      [{ default_subscription: 'opt_in' }, '`name`'],
      [{ name: 'x'.repeat(51), default_subscription: 'opt_in' }, '`name`'],
      [{ name: 'x', description: 'd'.repeat(201), default_subscription: 'opt_in' }, '`description`'],
      [{ name: 'x', default_subscription: 'maybe' }, '`default_subscription`'],
      [{ name: 'x', default_subscription: 'opt_in', visibility: 'secret' }, '`visibility`'],
      [{ name: 'x\u0000', default_subscription: 'opt_in' }, '`name`'],
    ];
    for (const [body, field] of cases) {
      const { status, body: error } = await call('POST', '/topics', body);
      expect(status, JSON.stringify(body)).toBe(422);
      expect(error.message, JSON.stringify(body)).toContain(field);
    }
  });

  it('answers 404 for unknown topics and contacts, 422 for ids that are not ids', async () => {
    for (const [method, body] of [['GET'], ['PATCH', { name: 'x' }], ['DELETE']] as const) {
      expect(await call(method, `/topics/${NOWHERE}`, body)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Topic not found' } });
      expect(await call(method, '/topics/news@example.com', body)).toMatchObject({ status: 422, body: { name: 'invalid_parameter' } });
    }
    for (const [method, body] of [['GET'], ['PATCH', []]] as const) {
      expect(await call(method, `/contacts/${NOWHERE}/topics`, body)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Contact not found' } });
      expect(await call(method, '/contacts/nobody@example.com/topics', body)).toMatchObject({ status: 404 });
    }
  });

  it('lists every topic with the contact\'s subscription, its own choice or else the default', async () => {
    const [inTopic, outTopic] = [await topic('Digest', 'opt_in', { description: 'Weekly.' }), await topic('Offers', 'opt_out')];
    const id = await contact('reader@example.com');
    expect((await call('GET', `/contacts/${id}/topics`)).body.data).toEqual(
      expect.arrayContaining([
        { id: inTopic, name: 'Digest', description: 'Weekly.', subscription: 'opt_in' },
        { id: outTopic, name: 'Offers', description: null, subscription: 'opt_out' },
      ]),
    );
    // The SDK's bare array, by email.
    const bare = await call('PATCH', '/contacts/READER@example.com/topics', [{ id: inTopic, subscription: 'opt_out' }, { id: outTopic, subscription: 'opt_in' }]);
    expect(bare).toEqual({ status: 200, body: { object: 'contact_topics', id, topics: [{ id: inTopic, subscription: 'opt_out' }, { id: outTopic, subscription: 'opt_in' }] } });
    expect(await subscriptions(id)).toMatchObject({ [inTopic]: 'opt_out', [outTopic]: 'opt_in' });
    // Resend's documented `{topics}`; a topic not named keeps its choice; of two choices the last holds.
    const wrapped = await call('PATCH', `/contacts/${id}/topics`, { topics: [{ id: inTopic, subscription: 'opt_out' }, { id: inTopic, subscription: 'opt_in' }] });
    expect(wrapped.body).toEqual({ object: 'contact_topics', id, topics: [{ id: inTopic, subscription: 'opt_in' }] });
    expect(await subscriptions(id)).toMatchObject({ [inTopic]: 'opt_in', [outTopic]: 'opt_in' });
    expect(await choices(id)).toHaveLength(2);
  });

  it('refuses an unknown topic or a bad choice with 422, changing nothing', async () => {
    const known = await topic('Known', 'opt_in');
    const id = await contact('careful@example.com');
    const refused = await call('PATCH', `/contacts/${id}/topics`, [{ id: known, subscription: 'opt_out' }, { id: NOWHERE, subscription: 'opt_out' }]);
    expect(refused).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `The topic \`${NOWHERE}\` in \`topics\` does not exist.` } });
    expect(await choices(id)).toEqual([]);
    for (const body of [[{ id: known }], [{ id: known, subscription: 'yes' }], [{ id: 'nope', subscription: 'opt_in' }], { topics: 'all' }, { other: [] }, [{ id: known, subscription: 'opt_in', extra: 1 }]]) {
      expect((await call('PATCH', `/contacts/${id}/topics`, body)).status, JSON.stringify(body)).toBe(422);
    }
    // Either shape of the body is judged as itself, naming the field at fault.
    expect((await call('PATCH', `/contacts/${id}/topics`, { topics: [{ id: 'x', subscription: 'opt_in' }] })).body.message).toBe('The `topics.0.id` must be a valid UUID.');
    expect((await call('PATCH', `/contacts/${id}/topics`, [{ id: known }])).body).toMatchObject({ name: 'missing_required_field', message: 'Missing `0.subscription` field.' });
    expect((await call('PATCH', `/contacts/${id}/topics`, { other: [] })).body).toMatchObject({ name: 'missing_required_field', message: 'Missing `topics` field.' });
    // JSON that is neither an array nor an object is refused by the body parser, as everywhere.
    expect((await call('PATCH', `/contacts/${id}/topics`, 'opt_in')).body).toMatchObject({ statusCode: 400, name: 'invalid_json' });
    expect((await call('PATCH', `/contacts/${id}/topics`, Array.from({ length: 101 }, () => ({ id: known, subscription: 'opt_in' })))).status).toBe(422);
    expect(await choices(id)).toEqual([]);
  });

  it('creates a contact with topic choices, and refuses an unknown topic, creating nothing', async () => {
    const [a, b] = [await topic('A', 'opt_in'), await topic('B', 'opt_in')];
    const id = await contact('chooser@example.com', { topics: [{ id: a, subscription: 'opt_out' }] });
    expect(await subscriptions(id)).toMatchObject({ [a]: 'opt_out', [b]: 'opt_in' });
    const refused = await call('POST', '/contacts', { email: 'nobody@example.com', topics: [{ id: b, subscription: 'opt_out' }, { id: NOWHERE, subscription: 'opt_in' }] });
    expect(refused).toMatchObject({ status: 422, body: { message: `The topic \`${NOWHERE}\` in \`topics\` does not exist.` } });
    expect((await call('GET', '/contacts/nobody@example.com')).status).toBe(404);
    // The same email again: 200, choices unchanged.
    expect(await call('POST', '/contacts', { email: 'chooser@example.com', topics: [{ id: a, subscription: 'opt_in' }] })).toEqual({ status: 200, body: { object: 'contact', id } });
    expect((await subscriptions(id))[a]).toBe('opt_out');
  });

  it('deleting a topic removes every choice for it', async () => {
    const doomed = await topic('Doomed');
    const ids = [await contact('c1@example.com'), await contact('c2@example.com')];
    for (const id of ids) await call('PATCH', `/contacts/${id}/topics`, [{ id: doomed, subscription: 'opt_out' }]);
    const count = () => server.store.database.db.selectFrom('contact_topics').select('contact_id').where('topic_id', '=', doomed).execute();
    expect(await count()).toHaveLength(2);
    await call('DELETE', `/topics/${doomed}`);
    expect(await count()).toEqual([]);
    expect(await subscriptions(ids[0]!)).not.toHaveProperty(doomed);
  });

  it('keeps one choice per topic under 20 concurrent updates, and none for a topic deleted meanwhile', async () => {
    const [steady, doomed] = [await topic('Steady'), await topic('Racing')];
    const id = await contact('busy@example.com');
    const answers = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => call('PATCH', `/contacts/${id}/topics`, [{ id: steady, subscription: i % 2 ? 'opt_in' : 'opt_out' }, { id: doomed, subscription: 'opt_out' }])),
      call('DELETE', `/topics/${doomed}`),
    ]);
    expect(answers.every((a) => a.status === 200 || (a.status === 422 && a.body.message.includes(doomed)))).toBe(true);
    // When the delete wins every race, each update is refused whole and nothing is chosen.
    const applied = answers.some((a, i) => i < 20 && a.status === 200);
    expect((await choices(id)).map((c) => c.topic_id)).toEqual(applied ? [steady] : []);
  });

  describe('paging', () => {
    let expected: string[];
    let reader: string;
    beforeAll(async () => {
      const base = Date.parse('2020-01-01T00:00:00.000Z');
      const records = Array.from({ length: 23 }, (_, i) => ({
        id: randomUUID(), name: `t${i}`, description: null, default_subscription: i % 2 ? ('opt_in' as const) : ('opt_out' as const), visibility: 'private' as const,
        created_at: new Date(base + Math.floor(i / 3) * 1000).toISOString(),
      }));
      await server.store.database.db.deleteFrom('contact_topics').execute();
      await server.store.database.db.deleteFrom('topics').execute();
      await server.store.database.db.insertInto('topics').values(records).execute();
      expected = records.sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1)).map((r) => r.id);
      reader = await contact('pager@example.com');
    });

    it.each(['/topics', '/contacts/pager@example.com/topics'])('%s pages forward and backward, has_more exact', async (path) => {
      for (const limit of [1, 4, 100]) {
        const forward: string[] = [];
        for (let after: string | undefined; ; ) {
          const { body } = await call('GET', `${path}?limit=${limit}${after ? `&after=${after}` : ''}`);
          forward.push(...body.data.map((t: { id: string }) => t.id));
          expect(body.has_more).toBe(forward.length < expected.length);
          if (!body.has_more) break;
          after = forward.at(-1);
        }
        expect(forward).toEqual(expected);
        const backward: string[] = [];
        for (let before = expected.at(-1)!; ; ) {
          const { body } = await call('GET', `${path}?limit=${limit}&before=${before}`);
          backward.unshift(...body.data.map((t: { id: string }) => t.id));
          expect(body.has_more).toBe(backward.length < expected.length - 1);
          if (!body.has_more) break;
          before = backward[0]!;
        }
        expect(backward).toEqual(expected.slice(0, -1));
      }
      expect((await call('GET', path)).body.data.map((t: { id: string }) => t.id)).toEqual(expected);
      expect(await call('GET', `${path}?after=${NOWHERE}`)).toMatchObject({ status: 422, body: { message: 'The `after` topic does not exist.' } });
      expect(await call('GET', `${path}?after=${expected[0]}&before=${expected[1]}`)).toMatchObject({ status: 422, body: { message: 'Only one of `after` or `before` may be given.' } });
    });

    it('a contact\'s page carries its subscriptions', async () => {
      await call('PATCH', `/contacts/${reader}/topics`, [{ id: expected[0], subscription: 'opt_in' }, { id: expected[1], subscription: 'opt_out' }]);
      const { body } = await call('GET', `/contacts/${reader}/topics?limit=2`);
      expect(body.data.map((t: { subscription: string }) => t.subscription)).toEqual(['opt_in', 'opt_out']);
    });
  });
});
