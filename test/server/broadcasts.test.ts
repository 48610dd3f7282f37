// POST /broadcasts and GET /broadcasts/{broadcast_id}, on SQLite and PostgreSQL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const SEGMENT = '78261eea-8f8b-4381-83c6-79fa7120f1cf';
const TOPIC = 'b6d24b8e-af0b-4c3c-be0c-359bbd97381e';

describe.each(backends)('broadcasts on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  it('creates a draft and returns every seed field, audience_id equal to segment_id, placeholders verbatim', async () => {
    const html = '<p>Hi {{{FIRST_NAME|there}}}, news for {{{COMPANY}}}.</p>';
    const created = await server.client.POST('/broadcasts', {
      body: { segment_id: SEGMENT, name: 'November update', from: 'Acme <news@acme.dev>', subject: 'News', reply_to: 'support@acme.dev', preview_text: 'Three things', html, text: 'Hi {{{FIRST_NAME|there}}}', topic_id: TOPIC },
    });
    expect(created.response.status).toBe(201);
    const id = created.data!.id;
    const { data, response } = await server.client.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: id } } });
    expect(response.status).toBe(200);
    expect(data).toEqual({
      object: 'broadcast',
      id,
      name: 'November update',
      audience_id: SEGMENT,
      segment_id: SEGMENT,
      from: 'Acme <news@acme.dev>',
      subject: 'News',
      reply_to: ['support@acme.dev'],
      preview_text: 'Three things',
      html,
      text: 'Hi {{{FIRST_NAME|there}}}',
      status: 'draft',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      scheduled_at: null,
      sent_at: null,
      topic_id: TOPIC,
    });
  });

  it('accepts the legacy audience_id, and fills what was not given with null or the default name', async () => {
    const { data: ref } = await server.client.POST('/broadcasts', { body: { audience_id: SEGMENT, from: 'news@acme.dev', subject: 'S', text: 'plain' } });
    const { data } = await server.client.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: ref!.id } } });
    expect(data).toMatchObject({ name: 'Untitled', segment_id: SEGMENT, audience_id: SEGMENT, reply_to: null, preview_text: null, html: null, topic_id: null });
  });

  it('rejects a broadcast with no segment, no body, or two different segments', async () => {
    const base = { from: 'news@acme.dev', subject: 'S' };
    const noSegment = await server.client.POST('/broadcasts', { body: { ...base, html: '<p>x</p>' } as never });
    expect(noSegment.response.status).toBe(422);
    const noBody = await server.client.POST('/broadcasts', { body: { ...base, segment_id: SEGMENT } });
    expect(noBody.response.status).toBe(422);
    // A draft may be saved with empty bodies, but not sent: the send refuses it, and nothing is stored.
    const segment = (await server.client.POST('/segments', { body: { name: 'Empty bodies' } })).data!.id;
    for (const empty of [{ html: '' }, { text: '' }, { html: '', text: '' }]) {
      const emptyBody = await server.client.POST('/broadcasts', { body: { ...base, segment_id: segment, ...empty, send: true } });
      expect(emptyBody.error).toEqual({ statusCode: 422, name: 'validation_error', message: 'The broadcast has no body: `html` and `text` are both missing or empty; give one of them before sending it.' });
    }
    const listed = (await server.client.GET('/broadcasts')).data!.data;
    expect(listed.filter((broadcast) => broadcast.segment_id === segment)).toEqual([]);
    // One body not empty is enough.
    expect((await server.client.POST('/broadcasts', { body: { ...base, segment_id: segment, html: '', text: 'plain', send: true } })).response.status).toBe(201);
    const twoSegments = await server.client.POST('/broadcasts', { body: { ...base, text: 't', segment_id: SEGMENT, audience_id: randomUUID() } });
    expect(twoSegments.error).toMatchObject({ statusCode: 422, name: 'validation_error', message: expect.stringContaining('`audience_id`') });
  });

  it('answers 404 not_found for an unknown id and 422 invalid_parameter for a non-UUID one', async () => {
    const missing = await server.client.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: randomUUID() } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error).toEqual({ statusCode: 404, name: 'not_found', message: 'Broadcast not found' });
    const malformed = await server.client.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: 'launch-day' } } });
    expect(malformed.response.status).toBe(422);
    expect(malformed.error).toEqual({ statusCode: 422, name: 'invalid_parameter', message: 'The `broadcast_id` must be a valid UUID.' });
  });
});
