// The official `resend` SDK's broadcasts, pointed at a live Mailroom by its base URL alone, on SQLite
// and PostgreSQL: create, update, list, send, create-and-schedule, cancel, remove. The segment is
// written straight into its table.
import { Resend } from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { addSegment } from '../support/recipients.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const uuid = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe.each(backends)('the resend SDK broadcasts on %s', (backend) => {
  let server: TestServer;
  let resend: Resend;
  let segmentId: string;
  beforeAll(async () => {
    server = await startTestServer(backend);
    resend = new Resend(server.apiKey, { baseUrl: server.url });
    segmentId = await addSegment(server.store.database.db, 'SDK');
  });
  afterAll(() => server.close());

  it('creates, updates, lists and sends a broadcast', async () => {
    const created = await resend.broadcasts.create({ segmentId, from: 'Acme <news@acme.dev>', subject: 'November', html: '<p>Hi {{{FIRST_NAME|there}}}</p>', name: 'SDK launch', previewText: 'Three things' });
    expect(created).toMatchObject({ data: { id: uuid }, error: null });
    const id = created.data!.id;

    const updated = await resend.broadcasts.update(id, { subject: 'November news', replyTo: ['help@acme.dev'], text: 'Hi {{{FIRST_NAME|there}}}', topicId: null });
    expect(updated).toMatchObject({ data: { object: 'broadcast', id }, error: null });
    const got = await resend.broadcasts.get(id);
    expect(got.error).toBeNull();
    expect(got.data).toMatchObject({ object: 'broadcast', id, name: 'SDK launch', segment_id: segmentId, audience_id: segmentId, subject: 'November news', reply_to: ['help@acme.dev'], preview_text: 'Three things', status: 'draft', topic_id: null });

    const listed = await resend.broadcasts.list({ limit: 10 });
    expect(listed.error).toBeNull();
    expect(listed.data).toMatchObject({ object: 'list', has_more: false });
    expect(listed.data!.data).toContainEqual({ id, name: 'SDK launch', audience_id: segmentId, segment_id: segmentId, status: 'draft', created_at: timestamp, scheduled_at: null, sent_at: null, topic_id: null });
    expect((await resend.broadcasts.list()).data!.data.map((b) => b.id)).toContain(id);

    const sent = await resend.broadcasts.send(id);
    expect(sent).toMatchObject({ data: { id }, error: null });
    expect((await resend.broadcasts.get(id)).data).toMatchObject({ status: 'queued' });
    const again = await resend.broadcasts.send(id);
    expect(again).toMatchObject({ data: null, error: { name: 'validation_error', statusCode: 422, message: expect.stringContaining('`queued`') } });
  });

  it('duplicates a sent broadcast as a draft with its content, which can be changed and sent', async () => {
    const created = await resend.broadcasts.create({ segmentId, from: 'news@acme.dev', subject: 'Again', html: '<p>Once more</p>', name: 'Repeat', replyTo: 'help@acme.dev', send: true });
    const copy = await resend.broadcasts.duplicate(created.data!.id);
    expect(copy).toMatchObject({ data: { object: 'broadcast', id: uuid }, error: null });
    expect(copy.data!.id).not.toBe(created.data!.id);
    expect((await resend.broadcasts.get(copy.data!.id)).data).toMatchObject({ name: 'Repeat', segment_id: segmentId, from: 'news@acme.dev', subject: 'Again', html: '<p>Once more</p>', reply_to: ['help@acme.dev'], status: 'draft', scheduled_at: null, sent_at: null });
    expect((await resend.broadcasts.update(copy.data!.id, { subject: 'Again, changed' })).error).toBeNull();
    expect((await resend.broadcasts.send(copy.data!.id)).error).toBeNull();
    expect((await resend.broadcasts.duplicate('00000000-0000-4000-8000-000000000000')).error).toMatchObject({ statusCode: 404, name: 'not_found' });
  });

  it('creates one scheduled "in 1 hour" with send: true, then cancels it', async () => {
    const before = Date.now();
    const created = await resend.broadcasts.create({ segmentId, from: 'news@acme.dev', subject: 'Later', text: 'Soon', send: true, scheduledAt: 'in 1 hour' });
    expect(created).toMatchObject({ data: { id: uuid }, error: null });
    const id = created.data!.id;
    const got = (await resend.broadcasts.get(id)).data!;
    expect(got).toMatchObject({ status: 'scheduled', scheduled_at: timestamp });
    expect(Date.parse(got.scheduled_at!)).toBeGreaterThanOrEqual(before + 3_600_000 - 1000);

    const canceled = await resend.broadcasts.cancel(id);
    expect(canceled).toMatchObject({ data: { object: 'broadcast', id }, error: null });
    // Scheduled, it goes back to a draft, as Resend's cancel has it.
    expect((await resend.broadcasts.get(id)).data).toMatchObject({ status: 'draft', scheduled_at: null });
    expect((await resend.broadcasts.cancel(id)).error).toMatchObject({ name: 'validation_error', statusCode: 422 });
  });

  it('sends a draft scheduled at an ISO time, removes a draft, and removes a scheduled one, which never goes out', async () => {
    const draft = await resend.broadcasts.create({ audienceId: segmentId, from: 'news@acme.dev', subject: 'Draft', text: 'x' });
    const at = new Date(Date.now() + 86_400_000).toISOString();
    expect(await resend.broadcasts.send(draft.data!.id, { scheduledAt: at })).toMatchObject({ data: { id: draft.data!.id }, error: null });
    expect((await resend.broadcasts.get(draft.data!.id)).data).toMatchObject({ status: 'scheduled', scheduled_at: at });

    const doomed = await resend.broadcasts.create({ segmentId, from: 'news@acme.dev', subject: 'Doomed', html: '<p>x</p>' });
    const removed = await resend.broadcasts.remove(doomed.data!.id);
    expect(removed).toMatchObject({ data: { object: 'broadcast', id: doomed.data!.id, deleted: true }, error: null });
    expect((await resend.broadcasts.get(doomed.data!.id)).error).toMatchObject({ name: 'not_found', statusCode: 404 });
    expect(await resend.broadcasts.remove(draft.data!.id)).toMatchObject({ data: { object: 'broadcast', id: draft.data!.id, deleted: true }, error: null });
    expect((await resend.broadcasts.get(draft.data!.id)).error).toMatchObject({ name: 'not_found', statusCode: 404 });
    const sent = await resend.broadcasts.create({ segmentId, from: 'news@acme.dev', subject: 'Now', text: 'x', send: true });
    expect((await resend.broadcasts.remove(sent.data!.id)).error).toMatchObject({ name: 'validation_error', statusCode: 422, message: expect.stringContaining('`queued`') });
  });
});
