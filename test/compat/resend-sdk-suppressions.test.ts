// The official `resend` SDK's suppression calls (add, list with origin and pages, get and remove by id or
// address, batch add and remove), pointed at a live Mailroom by its base URL alone, on SQLite and PostgreSQL.
import { Resend } from 'resend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const uuid = expect.stringMatching(/^[0-9a-f-]{36}$/);
const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

describe.each(backends)('the resend SDK, suppressions, on %s', (backend) => {
  let server: TestServer;
  let resend: Resend;
  beforeAll(async () => {
    server = await startTestServer(backend);
    resend = new Resend(server.apiKey, { baseUrl: server.url });
  });
  afterAll(() => server.close());

  it('add, get by id and by address, list, remove', async () => {
    const added = await resend.suppressions.add({ email: 'Steve.Wozniak@Gmail.com' });
    expect(added).toMatchObject({ data: { object: 'suppression', id: uuid }, error: null });
    const id = added.data!.id;
    expect(await resend.suppressions.add({ email: 'steve.wozniak@gmail.com' })).toMatchObject({ data: { object: 'suppression', id }, error: null });

    const expected = { object: 'suppression', id, email: 'Steve.Wozniak@Gmail.com', origin: 'manual', source_id: null, created_at: timestamp };
    expect(await resend.suppressions.get(id)).toMatchObject({ data: expected, error: null });
    expect(await resend.suppressions.get('steve.wozniak@gmail.com')).toMatchObject({ data: expected, error: null });

    const listed = await resend.suppressions.list();
    expect(listed.error).toBeNull();
    expect(listed.data).toMatchObject({ object: 'list', has_more: false, data: [{ id, email: 'Steve.Wozniak@Gmail.com', origin: 'manual', source_id: null, created_at: timestamp }] });
    expect((await resend.suppressions.list({ origin: 'manual', limit: 1 })).data).toMatchObject({ has_more: false, data: [{ id }] });
    expect((await resend.suppressions.list({ origin: 'bounce' })).data).toMatchObject({ has_more: false, data: [] });

    expect(await resend.suppressions.remove('STEVE.WOZNIAK@gmail.com')).toMatchObject({ data: { object: 'suppression', id, deleted: true }, error: null });
    expect((await resend.suppressions.get(id)).error).toMatchObject({ name: 'not_found', statusCode: 404, message: 'Suppression not found' });
    const again = (await resend.suppressions.add({ email: 'steve.wozniak@gmail.com' })).data!.id;
    expect(await resend.suppressions.remove(again)).toMatchObject({ data: { object: 'suppression', id: again, deleted: true }, error: null });
  });

  it('batch add and batch remove, by address and by id', async () => {
    const added = await resend.suppressions.batch.add({ emails: ['ada@lovelace.dev', 'grace@hopper.dev', 'alan@turing.dev'] });
    expect(added.error).toBeNull();
    expect(added.data?.data).toEqual([
      { object: 'suppression', id: uuid },
      { object: 'suppression', id: uuid },
      { object: 'suppression', id: uuid },
    ]);
    const [ada, grace, alan] = added.data!.data.map((d) => d.id);
    const page = await resend.suppressions.list({ limit: 2 });
    expect(page.data).toMatchObject({ has_more: true });
    expect((await resend.suppressions.list({ limit: 2, after: page.data!.data[1]!.id })).data?.data).toHaveLength(1);

    expect(await resend.suppressions.batch.remove({ emails: ['ADA@lovelace.dev'] })).toMatchObject({ data: { data: [{ object: 'suppression', id: ada, deleted: true }] }, error: null });
    expect(await resend.suppressions.batch.remove({ ids: [grace!, alan!] })).toMatchObject({
      data: { data: [{ object: 'suppression', id: grace, deleted: true }, { object: 'suppression', id: alan, deleted: true }] },
      error: null,
    });
    expect((await resend.suppressions.list()).data?.data).toEqual([]);
  });

  it('errors come back in the SDK error shape', async () => {
    expect((await resend.suppressions.add({ email: 'nope' })).error).toMatchObject({ name: 'validation_error', statusCode: 422 });
    expect((await resend.suppressions.remove('nobody@example.com')).error).toMatchObject({ name: 'not_found', statusCode: 404 });
    expect((await resend.suppressions.get('')).error).toMatchObject({ name: 'missing_required_field' });
  });
});
