// A single email sent with `scheduled_at` on SQLite and PostgreSQL: it waits `scheduled` in the outbox
// until its time, a real relay gets it then and not before, and until it goes out it can be moved
// (PATCH /emails/{id}) or canceled (POST /emails/{id}/cancel), each with its event.
import { beforeEach, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { withWorkers } from '../support/delivery.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';

const json = { 'content-type': 'application/json' };

describe.each(backends)('scheduled emails on %s', (backend) => {
  const sink = withSink();
  const server = withServer(backend);
  /** A delivery worker of its own for each round: a stopped one has closed its relay connections. */
  const worker = withWorkers(server, sink, { idleMs: 10 });
  const db = () => server.store.database.db;

  beforeEach(() => {
    sink.received.length = 0;
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await server.request(path, { method, headers: json, ...(body !== undefined && { body: JSON.stringify(body) }) });
    return { status: res.status, body: await res.json() };
  };
  async function schedule(subject: string, scheduled_at: string): Promise<string> {
    const { status, body } = await call('POST', '/emails', { from: 'Acme <news@acme.dev>', to: 'reader@example.com', subject, text: 'Later.', scheduled_at });
    expect(status, JSON.stringify(body)).toBe(200);
    return body.id;
  }
  const typesOf = async (id: string) => (await call('GET', `/emails/${id}/events`)).body.data.map((event: { type: string }) => event.type);
  const delivered = (subject: string) => sink.received.filter((r) => r.mail.subject === subject);

  it('waits scheduled until its time, then goes to the relay dated then, keeping the time it was scheduled for', async () => {
    const at = new Date(Date.now() + 4000).toISOString();
    const id = await schedule('On time', at);
    const { body: email } = await call('GET', `/emails/${id}`);
    expect(email).toMatchObject({ last_event: 'scheduled', scheduled_at: at });
    expect(await typesOf(id)).toEqual(['email.queued', 'email.scheduled']);
    const listed = (await call('GET', '/emails?limit=5')).body.data.find((row: { id: string }) => row.id === id);
    expect(listed).toMatchObject({ last_event: 'scheduled', scheduled_at: at });

    await worker().runOnce(new Date(Date.parse(at) - 1));
    expect(delivered('On time')).toHaveLength(0);
    const running = worker();
    running.start();
    await sink.waitFor(1);
    await running.stop();
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(at));
    expect(delivered('On time')).toHaveLength(1);
    // Dated when it was ready to go, not when it was accepted (the header has whole seconds).
    expect(delivered('On time')[0]!.mail.date?.getTime()).toBe(Math.floor(Date.parse(at) / 1000) * 1000);
    expect((await call('GET', `/emails/${id}`)).body).toMatchObject({ last_event: 'sent', scheduled_at: at });
    expect(await typesOf(id)).toEqual(['email.queued', 'email.scheduled', 'email.sent']);
  });

  it('reads words as a time from now, and a time already past as now', async () => {
    const before = Date.now();
    const id = await schedule('In words', 'in 2 hours');
    const after = Date.now();
    const { scheduled_at } = (await call('GET', `/emails/${id}`)).body;
    expect(Date.parse(scheduled_at) - before).toBeGreaterThanOrEqual(2 * 3600_000 - 1000);
    expect(Date.parse(scheduled_at) - after).toBeLessThanOrEqual(2 * 3600_000);
    const past = await schedule('Past', '2020-01-01T00:00:00Z');
    expect((await call('GET', `/emails/${past}`)).body).toMatchObject({ last_event: 'queued', scheduled_at: null });
    await call('POST', `/emails/${id}/cancel`);
  });

  it('reads a fraction of a second as a fraction, of any length, and the forms ISO 8601 allows beside', async () => {
    const cases: [string, string][] = [
      ['2030-01-01T10:00:00.5Z', '2030-01-01T10:00:00.500Z'],
      ['2030-01-01T10:00:00.25Z', '2030-01-01T10:00:00.250Z'],
      ['2030-01-01T10:00:00.123456+00:00', '2030-01-01T10:00:00.123Z'],
      ['2030-01-01T10:00:00.999999999-05:30', '2030-01-01T15:30:00.999Z'],
      ['2030-01-01 10:00:00,5', '2030-01-01T10:00:00.500Z'],
      ['2030-01-01T10:00+01', '2030-01-01T09:00:00.000Z'],
      // Two spaces, a space before the offset, or a month in words: chrono-node read -05:00 as UTC and .5 as 5 ms.
      ['2030-01-01  09:00-05:00', '2030-01-01T14:00:00.000Z'],
      ['2030-01-01T09:00:00.5 +01:00', '2030-01-01T08:00:00.500Z'],
      ['Jan 1 2030 09:00 -05:30', '2030-01-01T14:30:00.000Z'],
      ['Jan 1 2030 09:00:00.25', '2030-01-01T09:00:00.250Z'],
    ];
    for (const [given, stored] of cases) {
      const id = await schedule('Fraction', given);
      expect((await call('GET', `/emails/${id}`)).body.scheduled_at, given).toBe(stored);
      await call('POST', `/emails/${id}/cancel`);
    }
    for (const scheduled_at of ['2030-02-30T10:00:00Z', '2030-13-01T10:00:00Z', '2030-01-01T24:00:00Z', '2030-01-01T10:00:60Z', '2030-13-08  00:07', '2030-01-01  09:00+05:99', 'Jan 1 2030 09:00 -00:75']) {
      const refused = await call('POST', '/emails', { from: 'news@acme.dev', to: 'r@example.com', subject: 's', text: 't', scheduled_at });
      expect(refused, scheduled_at).toMatchObject({ status: 422, body: { name: 'invalid_parameter' } });
    }
  });

  it('is refused when scheduled_at is not a time, and in a batch', async () => {
    const { status, body } = await call('POST', '/emails', { from: 'news@acme.dev', to: 'r@example.com', subject: 's', text: 't', scheduled_at: 'whenever' });
    expect({ status, body }).toEqual({ status: 422, body: { statusCode: 422, name: 'invalid_parameter', message: 'The `scheduled_at` `whenever` cannot be read as a time; give ISO 8601 or words such as `in 1 hour`.' } });
    // An offset past 23:59, which chrono-node would take as given.
    for (const scheduled_at of ['2030-01-01T00:00:00+24:00', '2030-01-01T00:00:00+00:60', '2030-01-01T00:00:00-2500']) {
      const offset = await call('POST', '/emails', { from: 'news@acme.dev', to: 'r@example.com', subject: 's', text: 't', scheduled_at });
      expect(offset, scheduled_at).toMatchObject({ status: 422, body: { name: 'invalid_parameter', message: expect.stringContaining('cannot be read as a time') } });
    }
    const eastmost = await call('POST', '/emails', { from: 'news@acme.dev', to: 'r@example.com', subject: 's', text: 't', scheduled_at: '2030-01-01T00:00:00+14:00' });
    expect(eastmost.status).toBe(200);
    expect((await call('GET', `/emails/${eastmost.body.id}`)).body).toMatchObject({ scheduled_at: '2029-12-31T10:00:00.000Z' });
    await call('POST', `/emails/${eastmost.body.id}/cancel`);
    const batch = await call('POST', '/emails/batch', [{ from: 'news@acme.dev', to: 'r@example.com', subject: 's', text: 't', scheduled_at: 'in 1 hour' }]);
    expect(batch).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: 'emails[0]: The field `scheduled_at` is not supported in a batch; send that email on its own.' } });
  });

  it('moves to another time, with another email.scheduled; a time already past queues it now', async () => {
    const id = await schedule('Moved', 'in 1 day');
    const later = new Date(Date.now() + 2 * 86_400_000).toISOString();
    expect(await call('PATCH', `/emails/${id}`, { scheduled_at: later })).toEqual({ status: 200, body: { object: 'email', id } });
    expect((await call('GET', `/emails/${id}`)).body).toMatchObject({ last_event: 'scheduled', scheduled_at: later });
    expect(await typesOf(id)).toEqual(['email.queued', 'email.scheduled', 'email.scheduled']);
    await worker().runOnce();
    expect(delivered('Moved')).toHaveLength(0);

    expect(await call('PATCH', `/emails/${id}`, { scheduled_at: '2020-01-01T00:00:00Z' })).toEqual({ status: 200, body: { object: 'email', id } });
    expect((await call('GET', `/emails/${id}`)).body).toMatchObject({ last_event: 'queued', scheduled_at: null });
    await worker().runOnce();
    expect(delivered('Moved')).toHaveLength(1);
    const refused = await call('PATCH', `/emails/${id}`, { scheduled_at: 'in 1 hour' });
    expect(refused).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The email is `sent`; only a `scheduled` email can be rescheduled.' } });
  });

  it('is canceled before its time and never sent; then neither canceled nor moved again', async () => {
    const id = await schedule('Canceled', 'in 1 hour');
    expect(await call('POST', `/emails/${id}/cancel`)).toEqual({ status: 200, body: { object: 'email', id } });
    expect((await call('GET', `/emails/${id}`)).body).toMatchObject({ last_event: 'canceled' });
    expect(await typesOf(id)).toEqual(['email.queued', 'email.scheduled', 'email.canceled']);
    await db().updateTable('emails').set({ next_attempt_at: new Date(0).toISOString() }).where('id', '=', id).execute(); // due, were it still waiting
    await worker().runOnce();
    expect(delivered('Canceled')).toHaveLength(0);
    const again = await call('POST', `/emails/${id}/cancel`);
    expect(again).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The email is `canceled`; only a `scheduled` email can be canceled.' } });
    expect((await call('PATCH', `/emails/${id}`, { scheduled_at: 'in 1 hour' })).status).toBe(422);
  });

  it('cannot be canceled while a delivery holds it, and can be canceled or moved once that claim has run out', async () => {
    const id = await schedule('Held', '2099-01-01T00:00:00Z');
    await db().updateTable('emails').set({ next_attempt_at: new Date(0).toISOString() }).where('id', '=', id).execute();
    const [claimed] = await server.store.emails.claimNextBatch(1, new Date(), 60_000);
    expect(claimed?.id).toBe(id);
    const held = await call('POST', `/emails/${id}/cancel`);
    expect(held).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The email is being sent; it can no longer be canceled.' } });
    await db().updateTable('emails').set({ next_attempt_at: new Date(0).toISOString() }).where('id', '=', id).execute(); // the lease ran out
    expect((await call('POST', `/emails/${id}/cancel`)).status).toBe(200);
    // The late delivery cannot record an outcome over the cancel.
    expect(await server.store.emails.markDelivered([{ id, lease_token: claimed!.lease_token, messageId: '<late@acme.dev>', text: null }], new Date(), false)).toEqual([]);
    expect((await call('GET', `/emails/${id}`)).body.last_event).toBe('canceled');

    // Likewise a reschedule: the late outcome of a claim whose lease ran out does not overwrite the new time.
    const moved = await schedule('Held, moved', '2099-01-01T00:00:00Z');
    await db().updateTable('emails').set({ next_attempt_at: new Date(0).toISOString() }).where('id', '=', moved).execute();
    const [late] = await server.store.emails.claimNextBatch(1, new Date(), 60_000);
    await db().updateTable('emails').set({ next_attempt_at: new Date(0).toISOString() }).where('id', '=', moved).execute();
    expect((await call('PATCH', `/emails/${moved}`, { scheduled_at: 'in 1 day' })).status).toBe(200);
    expect(await server.store.emails.markDelivered([{ id: moved, lease_token: late!.lease_token, messageId: '<late@acme.dev>', text: null }], new Date(), false)).toEqual([]);
    expect((await call('GET', `/emails/${moved}`)).body.last_event).toBe('scheduled');
  });

  it('answers 404 for an unknown email and 422 for a body without scheduled_at', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await call('POST', `/emails/${unknown}/cancel`)).body).toEqual({ statusCode: 404, name: 'not_found', message: 'Email not found' });
    expect((await call('PATCH', `/emails/${unknown}`, { scheduled_at: 'in 1 hour' })).status).toBe(404);
    const { status, body } = await call('PATCH', `/emails/${unknown}`, {});
    expect({ status, name: body.name }).toEqual({ status: 422, name: 'missing_required_field' });
  });
});
