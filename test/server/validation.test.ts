// One set of validation rules, on SQLite and PostgreSQL: what a request may carry is what a response may
// return (addresses, contact properties), text both stores keep as given, and bodies nested too deep to parse.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSpec, schemaCompiler } from '../../server/contract.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const validAddress = schemaCompiler(loadSpec())('/components/schemas/EmailAddress');
const json = { 'content-type': 'application/json' };

describe.each(backends)('validation on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server.close());

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await server.request(path, { method, headers: { ...json, ...headers }, ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  describe('finding 4: an address POST /contacts accepts is returned by every read path', () => {
    const candidates = [
      'a@localhost', 'a..b@x.dev', '.lead@x.dev', 'trail.@x.dev', 'a@x..dev', 'a@-x.dev', 'a@x-.dev', 'a@.x.dev', 'a b@x.dev', 'a@x_y.dev',
      'plain@example.com', 'First.Last+tag@Sub.Example.COM', "o'brien@example.ie", 'x@1.2', 'under_score@a-b.example', `${'l'.repeat(64)}@example.com`,
    ];

    it('refuses dotless domains and dots at the start, end or twice in a row, naming `email`', async () => {
      for (const email of ['a@localhost', 'a..b@x.dev', '.lead@x.dev', 'trail.@x.dev']) {
        expect(await call('POST', '/contacts', { email }), email).toEqual({
          status: 422,
          body: { statusCode: 422, name: 'validation_error', message: 'The `email` must be a valid email address.' },
        });
      }
    });

    it('accepts exactly what the contract compiled by schemaCompiler accepts, and every read path returns it', async () => {
      const accepted: { id: string; email: string }[] = [];
      for (const email of candidates) {
        const { status, body } = await call('POST', '/contacts', { email });
        expect(status === 201, `${email}: POST answered ${status}`).toBe(validAddress(email));
        if (status !== 201) continue;
        accepted.push({ id: body.id, email });
        expect(await call('GET', `/contacts/${body.id}`), email).toMatchObject({ status: 200, body: { email } });
        expect(await call('GET', `/contacts/${encodeURIComponent(email)}`), email).toMatchObject({ status: 200, body: { id: body.id } });
      }
      expect(accepted.length).toBeGreaterThan(5);
      const streamed = await server.request('/contacts');
      expect(streamed.status).toBe(200);
      const everything = JSON.parse(await streamed.text()); // a cut-off stream would not parse
      const paged = await call('GET', '/contacts?limit=100');
      expect(paged.status).toBe(200);
      for (const list of [everything.data, paged.body.data]) {
        expect(list.map((c: { id: string; email: string }) => ({ id: c.id, email: c.email }))).toEqual(expect.arrayContaining(accepted));
      }
    });
  });
});
