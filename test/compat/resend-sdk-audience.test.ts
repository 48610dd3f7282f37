// The official `resend` SDK's segments, topics, contact memberships and subscriptions, and its legacy
// `audienceId` contact calls, pointed at a live Mailroom by its base URL alone, on SQLite and PostgreSQL.
import { Resend } from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const uuid = expect.stringMatching(/^[0-9a-f-]{36}$/);
const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe.each(backends)('the resend SDK, audience side, on %s', (backend) => {
  let server: TestServer;
  let resend: Resend;
  beforeAll(async () => {
    server = await startTestServer(backend);
    resend = new Resend(server.apiKey, { baseUrl: server.url });
  });
  afterAll(() => server.close());

  it('segments: create, list, get, update, remove', async () => {
    const created = await resend.segments.create({ name: 'Readers' });
    expect(created).toMatchObject({ data: { object: 'segment', id: uuid, name: 'Readers' }, error: null });
    const id = created.data!.id;
    const listed = await resend.segments.list();
    expect(listed.error).toBeNull();
    expect(listed.data).toMatchObject({ object: 'list', has_more: false, data: [{ id, name: 'Readers', created_at: timestamp }] });
    expect((await resend.segments.list({ limit: 1 })).data).toMatchObject({ has_more: false, data: [{ id }] });
    expect(await resend.segments.get(id)).toMatchObject({ data: { object: 'segment', id, name: 'Readers', created_at: timestamp }, error: null });
    expect(await resend.segments.update(id, { name: 'Subscribers' })).toMatchObject({ data: { object: 'segment', id }, error: null });
    expect((await resend.audiences.get(id)).data?.name).toBe('Subscribers');
    expect(await resend.segments.remove(id)).toMatchObject({ data: { object: 'segment', id, deleted: true }, error: null });
    expect((await resend.segments.get(id)).error).toMatchObject({ name: 'not_found', statusCode: 404, message: 'Segment not found' });
  });

  it('topics: create, list, get, update, remove', async () => {
    const created = await resend.topics.create({ name: 'Product updates', description: 'Monthly.', defaultSubscription: 'opt_in' });
    expect(created).toMatchObject({ data: { id: uuid }, error: null });
    const id = created.data!.id;
    const listed = await resend.topics.list();
    expect(listed.error).toBeNull();
    expect(listed.data?.data).toEqual([expect.objectContaining({ id, name: 'Product updates', description: 'Monthly.', default_subscription: 'opt_in', created_at: timestamp })]);
    expect(await resend.topics.get(id)).toMatchObject({ data: { id, name: 'Product updates', default_subscription: 'opt_in', created_at: timestamp }, error: null });
    expect(await resend.topics.update({ id, name: 'Product news', description: 'Every month.' })).toMatchObject({ data: { id }, error: null });
    expect((await resend.topics.get(id)).data).toMatchObject({ name: 'Product news', description: 'Every month.' });
    expect(await resend.topics.remove(id)).toMatchObject({ data: { object: 'topic', id, deleted: true }, error: null });
    expect((await resend.topics.get(id)).error).toMatchObject({ name: 'not_found', statusCode: 404 });
  });

  it('contacts: create with segments and topics, their segments and topics, and list by segment', async () => {
    const segmentId = (await resend.segments.create({ name: 'Beta' })).data!.id;
    const other = (await resend.segments.create({ name: 'Other' })).data!.id;
    const topicId = (await resend.topics.create({ name: 'Offers', defaultSubscription: 'opt_in' })).data!.id;
    const created = await resend.contacts.create({ email: 'member@example.com', firstName: 'Mem', segments: [{ id: segmentId }], topics: [{ id: topicId, subscription: 'opt_out' }] });
    expect(created).toMatchObject({ data: { object: 'contact', id: uuid }, error: null });
    const contactId = created.data!.id;

    const bySegment = await resend.contacts.list({ segmentId });
    expect(bySegment.error).toBeNull();
    expect(bySegment.data).toMatchObject({ object: 'list', has_more: false, data: [{ id: contactId, email: 'member@example.com', first_name: 'Mem', unsubscribed: false, created_at: timestamp }] });
    expect((await resend.contacts.list({ segmentId: other, limit: 10 })).data).toMatchObject({ object: 'list', has_more: false, data: [] });

    expect(await resend.contacts.segments.add({ contactId, segmentId: other })).toMatchObject({ data: { id: other }, error: null });
    expect(await resend.contacts.segments.add({ email: 'member@example.com', segmentId: other })).toMatchObject({ data: { id: other }, error: null });
    const segments = await resend.contacts.segments.list({ contactId });
    expect(segments.error).toBeNull();
    expect(segments.data?.data.map((s) => s.id).sort()).toEqual([segmentId, other].sort());
    expect((await resend.contacts.segments.list({ email: 'member@example.com', limit: 1 })).data).toMatchObject({ object: 'list', has_more: true, data: [{ id: expect.any(String), name: expect.any(String), created_at: timestamp }] });
    expect(await resend.contacts.segments.remove({ email: 'member@example.com', segmentId: other })).toMatchObject({ data: { id: other, deleted: true }, error: null });
    expect((await resend.contacts.segments.remove({ contactId, segmentId: other })).error).toMatchObject({ name: 'not_found', statusCode: 404 });
    expect((await resend.contacts.segments.list({ contactId })).data?.data.map((s) => s.id)).toEqual([segmentId]);

    const topics = await resend.contacts.topics.list({ id: contactId });
    expect(topics.error).toBeNull();
    expect(topics.data).toMatchObject({ object: 'list', has_more: false, data: [{ id: topicId, name: 'Offers', description: null, subscription: 'opt_out' }] });
    expect(await resend.contacts.topics.update({ id: contactId, topics: [{ id: topicId, subscription: 'opt_in' }] })).toMatchObject({ data: { id: contactId }, error: null });
    expect((await resend.contacts.topics.list({ email: 'member@example.com' })).data?.data[0]?.subscription).toBe('opt_in');
    expect(await resend.contacts.topics.update({ email: 'member@example.com', topics: [{ id: topicId, subscription: 'opt_out' }] })).toMatchObject({ data: { id: contactId }, error: null });
    expect((await resend.contacts.topics.list({ id: contactId })).data?.data[0]?.subscription).toBe('opt_out');

    const refused = await resend.contacts.create({ email: 'nobody@example.com', segments: [{ id: '00000000-0000-4000-8000-000000000000' }] });
    expect(refused).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 422 } });
  });

  it('contacts with the legacy audienceId: create, get, update, remove', async () => {
    const audienceId = (await resend.audiences.create({ name: 'Legacy' })).data!.id;
    const created = await resend.contacts.create({ audienceId, email: 'legacy@example.com', firstName: 'Leg' });
    expect(created).toMatchObject({ data: { object: 'contact', id: uuid }, error: null });
    const id = created.data!.id;
    expect(await resend.contacts.get({ audienceId, id })).toMatchObject({ data: { object: 'contact', id, email: 'legacy@example.com', first_name: 'Leg' }, error: null });
    expect((await resend.contacts.get({ audienceId, email: 'legacy@example.com' })).data?.id).toBe(id);
    expect(await resend.contacts.update({ audienceId, id, unsubscribed: true, lastName: 'Acy' })).toMatchObject({ data: { object: 'contact', id }, error: null });
    expect((await resend.contacts.get({ id })).data).toMatchObject({ unsubscribed: true, last_name: 'Acy' });
    expect((await resend.contacts.list({ audienceId })).data?.data.map((c) => c.id)).toEqual([id]);
    expect(await resend.contacts.remove({ audienceId, email: 'legacy@example.com' })).toMatchObject({ data: { object: 'contact', contact: id, deleted: true }, error: null });
    expect((await resend.contacts.get({ id })).error).toMatchObject({ name: 'not_found', statusCode: 404 });
    expect((await resend.contacts.get({ audienceId: '00000000-0000-4000-8000-000000000000', id })).error).toMatchObject({ name: 'not_found', message: 'Audience not found' });
  });
});
