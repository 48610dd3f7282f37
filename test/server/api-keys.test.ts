// API keys over HTTP: a token shown once that works at once, with its permission; the list without
// tokens, newest first, paged; renaming; revoking, after which the token is refused; the last full
// access key kept (also against two revocations at once); a key revoked by another process refused
// within a second; and the last use, to the minute.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_TRUSTED_MS } from '../../server/store/apiKeys.ts';
import { openStore } from '../../server/store/index.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe.each(backends)('API keys on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  async function call(method: string, path: string, body?: unknown, token = server.apiKey): Promise<{ status: number; body: any }> {
    const res = await fetch(server.url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }
  const create = (name: string, permission?: string) => call('POST', '/api-keys', { name, ...(permission && { permission }) });
  const listed = async () => (await call('GET', '/api-keys')).body.data as { id: string; name: string; permission: string; created_at: string; last_used_at: string | null }[];

  it('creates a full access key by default whose token works at once and is never shown again', async () => {
    const created = await create('deploy bot');
    expect(created).toEqual({ status: 201, body: { id: expect.stringMatching(UUID), token: expect.stringMatching(/^re_[0-9A-Za-z]{32}$/) } });
    expect((await call('GET', '/contacts?limit=1', undefined, created.body.token)).status).toBe(200);
    const list = await call('GET', '/api-keys');
    expect(list.status).toBe(200);
    expect(list.body.data.find((k: { id: string }) => k.id === created.body.id)).toEqual({
      id: created.body.id, name: 'deploy bot', permission: 'full_access', domain_id: null, created_at: expect.any(String), last_used_at: expect.any(String),
    });
    expect(JSON.stringify(list.body)).not.toContain(created.body.token);
  });

  it('gives a sending key sending only', async () => {
    const { body } = await create('web app', 'sending_access');
    expect(await call('GET', '/contacts?limit=1', undefined, body.token)).toEqual({ status: 401, body: expect.objectContaining({ name: 'restricted_api_key' }) });
    expect((await call('POST', '/emails', { from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'x' }, body.token)).status).toBe(200);
    expect((await call('GET', '/api-keys', undefined, body.token)).status).toBe(401);
  });

  it('refuses a name that is empty or too long, and an unknown permission', async () => {
    for (const body of [{ name: '' }, { name: 'x'.repeat(51) }, { name: 'a', permission: 'admin' }, {}]) {
      expect((await call('POST', '/api-keys', body)).status).toBe(422);
    }
  });

  it('lists newest first, a page at a time, and refuses an unknown cursor', async () => {
    for (const name of ['p1', 'p2', 'p3']) await create(name);
    const all = await listed();
    const first = await call('GET', '/api-keys?limit=2');
    expect(first.body.data.map((k: { id: string }) => k.id)).toEqual(all.slice(0, 2).map((k) => k.id));
    expect(first.body.has_more).toBe(true);
    const next = await call('GET', `/api-keys?limit=2&after=${first.body.data[1].id}`);
    expect(next.body.data.map((k: { id: string }) => k.id)).toEqual(all.slice(2, 4).map((k) => k.id));
    const back = await call('GET', `/api-keys?limit=2&before=${next.body.data[0].id}`);
    expect(back.body.data.map((k: { id: string }) => k.id)).toEqual(all.slice(0, 2).map((k) => k.id));
    expect((await call('GET', '/api-keys?after=0d3c0a5e-1b7a-4c11-9e55-8c3f1f3f0e2a')).status).toBe(422);
  });

  it('renames a key, and answers 404 for one unknown or revoked', async () => {
    const { body } = await create('old name', 'sending_access');
    expect(await call('PATCH', `/api-keys/${body.id}`, { name: 'new name' })).toEqual({ status: 200, body: { object: 'api_key', id: body.id } });
    expect((await listed()).find((k) => k.id === body.id)?.name).toBe('new name');
    expect((await call('PATCH', '/api-keys/0d3c0a5e-1b7a-4c11-9e55-8c3f1f3f0e2a', { name: 'x' })).status).toBe(404);
    await call('DELETE', `/api-keys/${body.id}`);
    expect((await call('PATCH', `/api-keys/${body.id}`, { name: 'x' })).status).toBe(404);
  });

  it('revokes a key: its token is refused from the next request, it leaves the list, and a second revoke is 404', async () => {
    const { body } = await create('leaving', 'sending_access');
    expect(await call('DELETE', `/api-keys/${body.id}`)).toEqual({ status: 200, body: { object: 'api_key', id: body.id, deleted: true } });
    expect(await call('POST', '/emails', { from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'x' }, body.token)).toEqual({ status: 403, body: expect.objectContaining({ name: 'invalid_api_key' }) });
    expect((await listed()).map((k) => k.id)).not.toContain(body.id);
    expect((await call('DELETE', `/api-keys/${body.id}`)).status).toBe(404);
  });

  it('answers one of several revocations of a key at once with 200 and the others with 404', async () => {
    for (const permission of ['sending_access', 'full_access']) {
      for (let round = 0; round < 5; round++) {
        const { id } = (await create(`raced ${permission} ${round}`, permission)).body;
        const answers = await Promise.all(Array.from({ length: 6 }, () => call('DELETE', `/api-keys/${id}`)));
        expect(answers.map((a) => a.status).sort(), `${permission} round ${round}`).toEqual([200, 404, 404, 404, 404, 404]);
      }
    }
  });

  it('warns at start when MAILROOM_API_KEY is a key revoked since, which it then refuses', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-revoked-seed-'));
    try {
      const first = await startTestServer('sqlite', { config: { dataDir } });
      await first.api('POST', '/api-keys', { name: 'the other full access key' });
      const seeded = ((await first.api('GET', '/api-keys')).data as { id: string; name: string }[]).find((key) => key.name === 'MAILROOM_API_KEY')!;
      expect((await first.request(`/api-keys/${seeded.id}`, { method: 'DELETE' })).status).toBe(200);
      await first.close();
      const second = await startTestServer('sqlite', { config: { dataDir } });
      expect(second.logs.filter((line) => line.level === 40 && /^MAILROOM_API_KEY is a revoked key/.test(line.msg))).toHaveLength(1);
      expect((await second.request('/contacts?limit=1')).status).toBe(403);
      await second.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a key revoked by another process within a second, and one revoked here at once', async () => {
    const { body } = await create('elsewhere', 'sending_access');
    const send = async () => (await call('POST', '/emails', { from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'x' }, body.token)).status;
    expect(await send()).toBe(200); // read now, so the server holds it
    const other = await openStore(server.config); // as `npm run keys revoke` would, or another server
    try {
      expect(await other.apiKeys.revoke(body.id, new Date().toISOString())).toBe(true);
    } finally {
      await other.close();
    }
    const revokedAt = performance.now();
    let status = await send();
    while (status === 200 && performance.now() - revokedAt < KEY_TRUSTED_MS + 1000) status = await send();
    expect(status).toBe(403);
    expect(performance.now() - revokedAt).toBeLessThan(KEY_TRUSTED_MS + 500);
  });

  it('notes the last use to the minute, never before the key was made', async () => {
    const { body } = await create('quiet', 'sending_access');
    expect((await listed()).find((k) => k.id === body.id)?.last_used_at).toBeNull();
    const before = new Date();
    await call('POST', '/emails', { from: 'a@acme.dev', to: 'b@example.com', subject: 'Hi', text: 'x' }, body.token);
    const key = (await listed()).find((k) => k.id === body.id)!;
    const used = key.last_used_at!;
    // In the minute it was made, its use is its making; after, the minute's start.
    if (used !== key.created_at) expect(used).toMatch(/:00\.000Z$/);
    expect(Date.parse(used)).toBeGreaterThanOrEqual(Date.parse(key.created_at));
    expect(Date.parse(used)).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(used)).toBeGreaterThan(before.getTime() - 60_000);
  });

  // Last: one of the two keys it leaves is revoked, perhaps the suite's own.
  it('keeps the last full access key, even against two revocations at once', async () => {
    // Leave exactly two full access keys: the test key and one more.
    for (const key of await listed()) if (key.permission === 'full_access' && key.name !== 'MAILROOM_API_KEY') await call('DELETE', `/api-keys/${key.id}`);
    const other = await create('second admin');
    const own = (await listed()).find((k) => k.name === 'MAILROOM_API_KEY')!;
    const outcomes = await Promise.all([call('DELETE', `/api-keys/${own.id}`, undefined, other.body.token), call('DELETE', `/api-keys/${other.body.id}`, undefined, other.body.token)]);
    expect(outcomes.map((o) => o.status).sort()).toEqual([200, 422]);
    const refused = outcomes.find((o) => o.status === 422)!;
    expect(refused.body).toEqual({ statusCode: 422, name: 'validation_error', message: 'This is the last full access key; create another before revoking it.' });
    const left = (await fetch(`${server.url}/api-keys`, { headers: { authorization: `Bearer ${outcomes[0].status === 200 ? other.body.token : server.apiKey}` } }).then((r) => r.json())) as { data: { permission: string }[] };
    expect(left.data.filter((k) => k.permission === 'full_access')).toHaveLength(1);
  });
});
