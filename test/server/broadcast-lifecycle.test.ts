// The broadcast lifecycle over HTTP, on SQLite and PostgreSQL: list, change and delete drafts, send now
// or later, create and send at once, cancel; each refused move a 422 naming the status.
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FanoutWorker } from '../../server/broadcasts/fanout.ts';
import { BroadcastMail } from '../../server/broadcasts/mail.ts';
import { backends } from '../support/backends.ts';
import { addContacts, addSegment, addTopic, outboxOf } from '../support/recipients.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe.each(backends)('the broadcast lifecycle on %s', (backend) => {
  let server: TestServer;
  let segment: string;

  beforeAll(async () => {
    server = await startTestServer(backend);
    segment = await addSegment(server.store.database.db);
  });
  afterAll(() => server.close());

  const json = (method: string, path: string, body?: unknown) =>
    server.request(path, { method, headers: { 'content-type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
  async function call(method: string, path: string, body?: unknown) {
    const res = await json(method, path, body);
    return { status: res.status, body: await res.json() };
  }
  async function draft(fields: Record<string, unknown> = {}): Promise<string> {
    const { status, body } = await call('POST', '/broadcasts', { segment_id: segment, from: 'Acme <news@acme.dev>', subject: 'News', html: '<p>Hi</p>', ...fields });
    expect(status, JSON.stringify(body)).toBe(201);
    return body.id;
  }
  const read = async (id: string) => (await call('GET', `/broadcasts/${id}`)).body;

  it('lists broadcasts newest first without bodies, paged both ways with exact has_more, or all at once', async () => {
    for (let i = 0; i < 23; i++) await draft({ name: `List ${i}` });
    const whole = await call('GET', '/broadcasts');
    expect(whole.status).toBe(200);
    expect(whole.body).toMatchObject({ object: 'list', has_more: false });
    const all: { id: string; created_at: string }[] = whole.body.data;
    expect(all.length).toBeGreaterThanOrEqual(23);
    const sorted = [...all].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1));
    expect(all.map((b) => b.id)).toEqual(sorted.map((b) => b.id));
    expect(Object.keys(all[0]!).sort()).toEqual(['audience_id', 'created_at', 'id', 'name', 'scheduled_at', 'segment_id', 'sent_at', 'status', 'topic_id']);

    const forward: string[] = [];
    for (let after: string | undefined; ; ) {
      const page = await call('GET', `/broadcasts?limit=7${after ? `&after=${after}` : ''}`);
      forward.push(...page.body.data.map((b: { id: string }) => b.id));
      expect(page.body.has_more).toBe(forward.length < all.length);
      if (!page.body.has_more) break;
      after = forward.at(-1);
    }
    expect(forward).toEqual(all.map((b) => b.id));

    const backward: string[] = [];
    for (let before = all.at(-1)!.id; ; ) {
      const page = await call('GET', `/broadcasts?limit=5&before=${before}`);
      backward.unshift(...page.body.data.map((b: { id: string }) => b.id));
      expect(page.body.has_more).toBe(backward.length < all.length - 1);
      if (!page.body.has_more) break;
      before = backward[0]!;
    }
    expect(backward).toEqual(all.slice(0, -1).map((b) => b.id));

    expect(await call('GET', `/broadcasts?limit=5&after=${randomUUID()}`)).toMatchObject({ status: 422, body: { name: 'validation_error', message: 'The `after` broadcast does not exist.' } });
    expect((await call('GET', `/broadcasts?after=${all[0]!.id}&before=${all[1]!.id}`)).status).toBe(422);
    expect((await call('GET', '/broadcasts?limit=101')).status).toBe(422);
  });

  it('changes only the fields given in a draft, and deletes a draft', async () => {
    const id = await draft({ topic_id: randomUUID(), reply_to: 'a@acme.dev', text: 'plain' });
    const changed = await call('PATCH', `/broadcasts/${id}`, { subject: 'New subject', topic_id: null, reply_to: ['b@acme.dev', 'c@acme.dev'], name: 'Renamed' });
    expect(changed).toEqual({ status: 200, body: { object: 'broadcast', id } });
    expect(await read(id)).toMatchObject({ subject: 'New subject', topic_id: null, reply_to: ['b@acme.dev', 'c@acme.dev'], name: 'Renamed', html: '<p>Hi</p>', text: 'plain', status: 'draft' });
    expect(await call('PATCH', `/broadcasts/${id}`, {})).toEqual({ status: 200, body: { object: 'broadcast', id } });
    const other = randomUUID();
    expect(await call('PATCH', `/broadcasts/${id}`, { audience_id: other })).toMatchObject({ status: 200 });
    expect(await read(id)).toMatchObject({ segment_id: other, audience_id: other });
    expect((await call('PATCH', `/broadcasts/${id}`, { segment_id: segment, audience_id: other })).status).toBe(422);
    expect((await call('PATCH', `/broadcasts/${id}`, { from: 'not an address' })).status).toBe(422);

    expect(await call('DELETE', `/broadcasts/${id}`)).toEqual({ status: 200, body: { object: 'broadcast', id, deleted: true } });
    expect((await call('GET', `/broadcasts/${id}`)).status).toBe(404);
    expect((await call('DELETE', `/broadcasts/${id}`)).status).toBe(404);
  });

  it('refuses to change, delete or send anything but a draft, naming its status', async () => {
    const id = await draft();
    expect(await call('POST', `/broadcasts/${id}/send`)).toEqual({ status: 200, body: { object: 'broadcast', id } });
    const refusal = (message: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
    expect(await call('PATCH', `/broadcasts/${id}`, { subject: 'Too late' })).toEqual(refusal('The broadcast is `queued`; only a `draft` can be changed.'));
    expect(await call('DELETE', `/broadcasts/${id}`)).toEqual(refusal('The broadcast is `queued`; only a `draft` or a `scheduled` broadcast can be deleted.'));
    expect(await call('POST', `/broadcasts/${id}/send`, {})).toMatchObject({ status: 422, body: { message: 'The broadcast is `queued`; only a `draft` can be sent.' } });
    expect(await read(id)).toMatchObject({ subject: 'News', status: 'queued', scheduled_at: null, sent_at: null });
  });

  it('sends now with no body, an empty body, or a time already past', async () => {
    for (const body of [undefined, {}, { scheduled_at: '2020-01-01T00:00:00.000Z' }, { scheduled_at: 'yesterday' }]) {
      const id = await draft();
      expect((await call('POST', `/broadcasts/${id}/send`, body)).status).toBe(200);
      expect(await read(id)).toMatchObject({ status: 'queued', scheduled_at: null });
    }
  });

  it('schedules with ISO 8601 and with words, stored as ISO UTC with milliseconds', async () => {
    const iso = await draft();
    const at = new Date(Date.now() + 3 * 86_400_000);
    at.setUTCMilliseconds(250);
    expect((await call('POST', `/broadcasts/${iso}/send`, { scheduled_at: at.toISOString() })).status).toBe(200);
    expect(await read(iso)).toMatchObject({ status: 'scheduled', scheduled_at: at.toISOString() });

    const offset = await draft();
    expect((await call('POST', `/broadcasts/${offset}/send`, { scheduled_at: '2099-11-21T10:00:00+02:00' })).status).toBe(200);
    expect((await read(offset)).scheduled_at).toBe('2099-11-21T08:00:00.000Z');

    // A date alone is its first instant, as ISO 8601 and JavaScript read it; a day that is not is refused.
    const day = await draft();
    expect((await call('POST', `/broadcasts/${day}/send`, { scheduled_at: '2099-11-21' })).status).toBe(200);
    expect((await read(day)).scheduled_at).toBe('2099-11-21T00:00:00.000Z');
    const noDay = await draft();
    expect(await call('POST', `/broadcasts/${noDay}/send`, { scheduled_at: '2099-02-30' })).toMatchObject({ status: 422, body: { name: 'invalid_parameter', message: expect.stringContaining('`scheduled_at` `2099-02-30` cannot be read as a time') } });

    const inAnHour = await draft();
    const before = Date.now();
    expect((await call('POST', `/broadcasts/${inAnHour}/send`, { scheduled_at: 'in 1 hour' })).status).toBe(200);
    const got = await read(inAnHour);
    expect(got.status).toBe('scheduled');
    expect(got.scheduled_at).toMatch(TIMESTAMP);
    expect(Date.parse(got.scheduled_at)).toBeGreaterThanOrEqual(before + 3_600_000 - 1000);
    expect(Date.parse(got.scheduled_at)).toBeLessThanOrEqual(Date.now() + 3_600_000 + 1000);

    const tomorrow = await draft();
    expect((await call('POST', `/broadcasts/${tomorrow}/send`, { scheduled_at: 'tomorrow at 9am' })).status).toBe(200);
    const nextDay = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    expect((await read(tomorrow)).scheduled_at).toBe(`${nextDay}T09:00:00.000Z`);
  });

  it('refuses a scheduled_at that is not a time, naming it, and leaves the draft as it was', async () => {
    const id = await draft();
    for (const scheduled_at of ['whenever', 'send it in 1 hour please', '   ', 'in 5000000 years', '31/31/2026']) {
      const answer = await call('POST', `/broadcasts/${id}/send`, { scheduled_at });
      expect(answer.status, scheduled_at).toBe(422);
      expect(answer.body.name).toBe('invalid_parameter');
      expect(answer.body.message).toContain('`scheduled_at`');
    }
    expect((await call('POST', `/broadcasts/${id}/send`, { scheduled_at: 'x'.repeat(101) })).status).toBe(422);
    expect((await call('POST', `/broadcasts/${id}/send`, { scheduled_at: 'in 1 hour\u0000' })).status).toBe(422);
    expect((await read(id)).status).toBe('draft');
  });

  it('creates and sends in one call, or refuses it whole', async () => {
    const base = { segment_id: segment, from: 'news@acme.dev', subject: 'At once', text: 'Hello' };
    const now = await call('POST', '/broadcasts', { ...base, send: true });
    expect(now.status).toBe(201);
    expect(Object.keys(now.body)).toEqual(['id']);
    expect(await read(now.body.id)).toMatchObject({ status: 'queued' });
    const later = await call('POST', '/broadcasts', { ...base, send: true, scheduled_at: 'in 1 hour' });
    expect(await read(later.body.id)).toMatchObject({ status: 'scheduled', scheduled_at: expect.stringMatching(TIMESTAMP) });
    expect(await call('POST', '/broadcasts', { ...base, send: false })).toMatchObject({ status: 201 });

    const count = async () => (await server.store.database.db.selectFrom('broadcasts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n;
    const before = Number(await count());
    expect(await call('POST', '/broadcasts', { ...base, scheduled_at: 'in 1 hour' })).toMatchObject({ status: 422, body: { name: 'missing_required_field', message: 'Missing `send` field; it is required with `scheduled_at`.' } });
    expect(await call('POST', '/broadcasts', { ...base, send: false, scheduled_at: 'in 1 hour' })).toMatchObject({ status: 422, body: { message: 'The `send` must be `true` with `scheduled_at`.' } });
    const noSegment = await call('POST', '/broadcasts', { ...base, segment_id: randomUUID(), send: true });
    expect(noSegment).toMatchObject({ status: 422, body: { name: 'validation_error', message: expect.stringContaining('segment') } });
    expect((await call('POST', '/broadcasts', { ...base, send: true, scheduled_at: 'whenever' })).status).toBe(422);
    expect(Number(await count())).toBe(before);
  });

  it('refuses to send to a segment or topic that does not exist, naming it; a draft may name them before they exist', async () => {
    const missingSegment = randomUUID();
    const id = await draft({ segment_id: missingSegment });
    expect(await call('POST', `/broadcasts/${id}/send`)).toEqual({
      status: 422,
      body: { statusCode: 422, name: 'validation_error', message: `The segment \`${missingSegment}\` does not exist; create it or give another \`segment_id\`.` },
    });
    const missingTopic = randomUUID();
    const withTopic = await draft({ topic_id: missingTopic });
    expect(await call('POST', `/broadcasts/${withTopic}/send`)).toMatchObject({ status: 422, body: { message: expect.stringContaining(`topic \`${missingTopic}\``) } });
    expect((await read(id)).status).toBe('draft');

    const topic = await addTopic(server.store.database.db, 'opt_in');
    expect((await call('PATCH', `/broadcasts/${withTopic}`, { topic_id: topic })).status).toBe(200);
    expect((await call('POST', `/broadcasts/${withTopic}/send`)).status).toBe(200);
  });

  it('refuses to delete a segment or topic a scheduled or sending broadcast is addressed to, until it is canceled or readdressed', async () => {
    const db = server.store.database.db;
    const ownSegment = await addSegment(db);
    const topic = await addTopic(db, 'opt_in');
    await addContacts(db, [{ email: 'going.out@example.com', segments: [ownSegment] }]);
    const id = await draft({ segment_id: ownSegment, topic_id: topic });
    expect((await call('POST', `/broadcasts/${id}/send`, { scheduled_at: 'in 2 days' })).status).toBe(200);
    const refusal = (what: string, status: string) => ({
      status: 422,
      body: { statusCode: 422, name: 'validation_error', message: `The ${what} cannot be deleted: broadcast \`${id}\`, which is ${status}, is addressed to it. Cancel that broadcast, or give it another ${what}, first.` },
    });
    expect(await call('DELETE', `/segments/${ownSegment}`)).toEqual(refusal('segment', 'scheduled'));
    expect(await call('DELETE', `/audiences/${ownSegment.toUpperCase()}`)).toEqual(refusal('segment', 'scheduled'));
    expect(await call('DELETE', `/topics/${topic}`)).toEqual(refusal('topic', 'scheduled'));
    expect((await call('GET', `/segments/${ownSegment}`)).status).toBe(200);

    // Canceled, it is a draft again, which may name what does not exist (yet): the topic goes.
    expect((await call('POST', `/broadcasts/${id}/cancel`)).status).toBe(200);
    expect((await call('DELETE', `/topics/${topic}`)).status).toBe(200);
    expect((await call('PATCH', `/broadcasts/${id}`, { topic_id: null })).status).toBe(200);
    // Being sent, its segment stays until its last email is written.
    expect((await call('POST', `/broadcasts/${id}/send`)).status).toBe(200);
    expect(await call('DELETE', `/segments/${ownSegment}`)).toEqual(refusal('segment', 'queued'));
    const fanout = new FanoutWorker(server.store, pino({ level: 'silent' }));
    while (await fanout.runOnce());
    expect((await read(id)).status).toBe('sent');
    // Sent, its emails are in the outbox, each checked against the segment as it goes: the segment
    // stays until the last has gone out. (Deleted, it cancelled every email not yet sent.)
    expect(await call('DELETE', `/segments/${ownSegment}`)).toEqual({
      status: 422,
      body: { statusCode: 422, name: 'validation_error', message: `The segment cannot be deleted yet: emails of broadcast \`${id}\`, which is addressed to it, are still going out. Try again once they have.` },
    });
    await db.updateTable('emails').set({ last_event: 'sent' }).where('broadcast_id', '=', id).execute();
    expect(await call('DELETE', `/segments/${ownSegment}`)).toEqual({ status: 200, body: { object: 'segment', id: ownSegment, deleted: true } });
  });

  it('refuses to send a draft whose html and text were changed to empty, and sends it once one is given', async () => {
    const id = await draft({ text: 'Hi' });
    expect((await call('PATCH', `/broadcasts/${id}`, { html: '', text: '' })).status).toBe(200);
    expect(await call('POST', `/broadcasts/${id}/send`)).toEqual({
      status: 422,
      body: { statusCode: 422, name: 'validation_error', message: 'The broadcast has no body: `html` and `text` are both missing or empty; give one of them before sending it.' },
    });
    expect((await read(id)).status).toBe('draft');
    expect((await call('PATCH', `/broadcasts/${id}`, { text: 'Hi again' })).status).toBe(200);
    expect((await call('POST', `/broadcasts/${id}/send`)).status).toBe(200);
  });

  it('cancels a scheduled broadcast back to a draft, as Resend does, and only a scheduled or queued one', async () => {
    const id = await draft();
    expect(await call('POST', `/broadcasts/${id}/cancel`)).toMatchObject({ status: 422, body: { message: 'The broadcast is `draft`; only a `scheduled` or `queued` broadcast can be canceled.' } });
    await call('POST', `/broadcasts/${id}/send`, { scheduled_at: 'in 2 days' });
    expect(await call('POST', `/broadcasts/${id}/cancel`)).toEqual({ status: 200, body: { object: 'broadcast', id } });
    expect(await read(id)).toMatchObject({ status: 'draft', scheduled_at: null, sent_at: null });
    // A draft again: it can be changed and sent, or scheduled again.
    expect((await call('PATCH', `/broadcasts/${id}`, { subject: 'Fixed' })).status).toBe(200);
    await call('POST', `/broadcasts/${id}/send`, { scheduled_at: 'in 3 days' });
    expect(await read(id)).toMatchObject({ status: 'scheduled', subject: 'Fixed', scheduled_at: expect.stringMatching(TIMESTAMP) });
  });

  it('deletes a scheduled broadcast, which then never goes out', async () => {
    const id = await draft();
    await call('POST', `/broadcasts/${id}/send`, { scheduled_at: 'in 2 days' });
    expect(await call('DELETE', `/broadcasts/${id}`)).toEqual({ status: 200, body: { object: 'broadcast', id, deleted: true } });
    expect((await call('GET', `/broadcasts/${id}`)).status).toBe(404);
    // Not once it is queued: its emails are being written.
    const queued = await draft();
    await call('POST', `/broadcasts/${queued}/send`);
    expect(await call('DELETE', `/broadcasts/${queued}`)).toMatchObject({ status: 422 });
    expect((await read(queued)).status).toBe('queued');
  });

  it('cancels a queued broadcast mid-fan-out: no more emails are written, those waiting end canceled, those claimed are withdrawn at delivery', async () => {
    const db = server.store.database.db;
    const own = await addSegment(db, 'Cancel');
    await addContacts(db, Array.from({ length: 30 }, (_, i) => ({ email: `cancel-${backend}-${i}@example.com`, segments: [own] })));
    const id = await draft({ segment_id: own });
    await call('POST', `/broadcasts/${id}/send`);
    // Other queued broadcasts of this suite would be claimed first: take them out of the way.
    await db.updateTable('broadcasts').set({ status: 'canceled' }).where('status', 'in', ['queued', 'scheduled']).where('id', '!=', id).execute();

    const held = (await server.store.fanout.claim(new Date(), 60_000))!;
    expect(held.id).toBe(id);
    expect(await server.store.fanout.writeChunk(held, 10, new Date(), 60_000)).toBe('more');
    const inDelivery = await server.store.emails.claimNextBatch(3, new Date(), 60_000);
    expect(inDelivery).toHaveLength(3);

    expect((await call('POST', `/broadcasts/${id}/cancel`)).status).toBe(200);
    expect(await server.store.fanout.writeChunk(held, 10, new Date(), 60_000)).toBe('lost');
    expect(await new FanoutWorker(server.store, pino({ level: 'silent' })).runOnce()).toBe(false);

    const events = await db.selectFrom('emails').select(['id', 'last_event']).where('broadcast_id', '=', id).execute();
    expect(events).toHaveLength(10);
    const delivering = new Set(inDelivery.map((e) => e.id));
    for (const email of events) expect(email.last_event).toBe(delivering.has(email.id) ? 'queued' : 'canceled');
    expect([...(await outboxOf(db, id)).values()].every((n) => n === 1)).toBe(true);
    expect(await read(id)).toMatchObject({ status: 'canceled', sent_at: null });
    // The worker that claimed them reads the broadcast's status as it builds their messages: none goes out.
    const outcomes = await new BroadcastMail(server.store, server.links).forDelivery(inDelivery);
    expect([...outcomes.values()]).toEqual(inDelivery.map(() => ({ cancel: 'the broadcast was canceled' })));
  });

  it('answers 404 for unknown ids and 422 for ids that are not UUIDs, on every broadcast operation', async () => {
    const unknown = randomUUID();
    for (const [method, path, body] of [
      ['PATCH', `/broadcasts/${unknown}`, { subject: 'x' }],
      ['DELETE', `/broadcasts/${unknown}`],
      ['POST', `/broadcasts/${unknown}/send`, {}],
      ['POST', `/broadcasts/${unknown}/cancel`],
    ] as const) {
      expect(await call(method, path, body)).toEqual({ status: 404, body: { statusCode: 404, name: 'not_found', message: 'Broadcast not found' } });
      const malformed = await call(method, path.replace(unknown, 'steve@example.com'), body);
      expect(malformed).toMatchObject({ status: 422, body: { name: 'invalid_parameter' } });
    }
  });

  it('never both sends and deletes one draft asked for at once', async () => {
    let sent = 0;
    let deleted = 0;
    for (let i = 0; i < 15; i++) {
      const id = await draft();
      const [send, remove] = await Promise.all([call('POST', `/broadcasts/${id}/send`), call('DELETE', `/broadcasts/${id}`)]);
      const after = await call('GET', `/broadcasts/${id}`);
      if (send.status === 200) {
        sent++;
        expect(remove).toMatchObject({ status: 422, body: { message: expect.stringContaining('`queued`') } });
        expect(after.body.status).toBe('queued');
      } else {
        deleted++;
        expect(send.status).toBe(404);
        expect(remove.status).toBe(200);
        expect(after.status).toBe(404);
      }
    }
    expect(sent + deleted).toBe(15);
  });
  it('cancels a draft being scheduled at that moment, or refuses naming the draft it found; never refuses a cancelable one', async () => {
    const outcomes = { canceled: 0, refused: 0 };
    for (let i = 0; i < 40; i++) {
      const id = await draft();
      const [send, cancel] = await Promise.all([call('POST', `/broadcasts/${id}/send`, { scheduled_at: 'in 1 hour' }), call('POST', `/broadcasts/${id}/cancel`)]);
      expect(send.status).toBe(200);
      if (cancel.status === 200) {
        outcomes.canceled++;
        expect((await read(id)).status).toBe('draft');
      } else {
        outcomes.refused++;
        expect(cancel.body.message).toBe('The broadcast is `draft`; only a `scheduled` or `queued` broadcast can be canceled.');
        expect((await read(id)).status).toBe('scheduled');
      }
    }
    expect(outcomes.canceled + outcomes.refused).toBe(40);
  });
});
