// An id in upper case in a request body names what it names in lower case, as in a path or a cursor:
// every place the contract types a body field as a Uuid, on SQLite and PostgreSQL. Text that only
// looks like a UUID, in a field that is no id, is left as written.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const json = { 'content-type': 'application/json' };

describe.each(backends)('ids in upper case in request bodies on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await server.request(path, { method, headers: json, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  };
  const created = async (path: string, body: unknown): Promise<string> => {
    const { status, body: answer } = await call('POST', path, body);
    expect(status, JSON.stringify(answer)).toBe(201);
    return answer.id;
  };

  it('joins segments and topics named in upper case when a contact is created, and sets its topics by them', async () => {
    const segment = await created('/segments', { name: `Upper ${backend}` });
    const topic = await created('/topics', { name: `Upper ${backend}`, default_subscription: 'opt_in' });
    const contact = await created('/contacts', { email: `upper-${backend}@example.com`, segments: [segment.toUpperCase(), { id: segment.toUpperCase() }], topics: [{ id: topic.toUpperCase(), subscription: 'opt_out' }] });
    expect((await call('GET', `/contacts/${contact}/segments`)).body.data.map((s: { id: string }) => s.id)).toEqual([segment]);
    expect((await call('GET', `/contacts/${contact}/topics`)).body.data).toEqual([expect.objectContaining({ id: topic, subscription: 'opt_out' })]);
    const patched = await call('PATCH', `/contacts/${contact}/topics`, [{ id: topic.toUpperCase(), subscription: 'opt_in' }]);
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect((await call('GET', `/contacts/${contact}/topics`)).body.data).toEqual([expect.objectContaining({ id: topic, subscription: 'opt_in' })]);
    expect((await call('PATCH', `/topics/${topic}`, { id: topic.toUpperCase(), name: 'Renamed' })).status).toBe(200);
  });

  it('stores a broadcast segment_id and topic_id given in upper case as the ids they are, so that it can be sent', async () => {
    const segment = await created('/segments', { name: `Broadcast ${backend}` });
    const topic = await created('/topics', { name: `Broadcast ${backend}`, default_subscription: 'opt_in' });
    const lookalike = randomUUID().toUpperCase(); // text, not an id: kept as written
    const id = await created('/broadcasts', { segment_id: segment.toUpperCase(), topic_id: topic.toUpperCase(), from: 'news@acme.dev', subject: lookalike, text: 'Hi' });
    expect((await call('GET', `/broadcasts/${id}`)).body).toMatchObject({ segment_id: segment, audience_id: segment, topic_id: topic, subject: lookalike });
    const updated = await call('PATCH', `/broadcasts/${id}`, { audience_id: segment.toUpperCase() });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    const sent = await call('POST', `/broadcasts/${id}/send`, {});
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
  });

  it('removes suppressions by ids given in upper case', async () => {
    const { body } = await call('POST', '/suppressions', { email: `gone-${backend}@example.com` });
    const removed = await call('POST', '/suppressions/batch/remove', { ids: [body.id.toUpperCase()] });
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    expect((await call('GET', `/suppressions/${body.id}`)).status).toBe(404);
  });
});
