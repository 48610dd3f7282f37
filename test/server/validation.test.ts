// One set of validation rules, on SQLite and PostgreSQL: what a request may carry is what a response may
// return (addresses, contact properties), text both stores keep as given, and bodies nested too deep to parse.
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSpec, schemaCompiler } from '../../server/contract.ts';
import { nestedDeeperThan } from '../../server/http/jsonBody.ts';
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
  const newContact = async (body: Record<string, unknown> = {}) => {
    const { status, body: ref } = await call('POST', '/contacts', { email: `${randomUUID()}@example.com`, ...body });
    expect(status).toBe(201);
    return ref.id as string;
  };

  describe('an address POST /contacts accepts is returned by every read path', () => {
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

  describe('PATCH keeps a contact within ContactProperties, and null removes a property', () => {
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`p${i}`, String(i)]));

    it('refuses an update that would leave more than 50 properties with 422 naming `properties`, changing nothing', async () => {
      const id = await newContact({ first_name: 'Before', properties: fifty });
      const res = await call('PATCH', `/contacts/${id}`, { first_name: 'After', properties: { extra1: 'x', extra2: 'y', p0: 'changed' } });
      expect(res).toEqual({
        status: 422,
        body: { statusCode: 422, name: 'validation_error', message: expect.stringMatching(/^The `properties` would hold 52 keys after this update; at most 50 are allowed/) },
      });
      const read = await call('GET', `/contacts/${id}`);
      expect(read).toMatchObject({ status: 200, body: { first_name: 'Before', properties: fifty } });
      // The refused update left no transaction or lock behind: the contact can still change, and be listed.
      expect((await call('PATCH', `/contacts/${id}`, { first_name: 'Later' })).status).toBe(200);
      expect(await call('GET', `/contacts/${id}`)).toMatchObject({ body: { first_name: 'Later' } });
      expect((await call('GET', '/contacts?limit=100')).status).toBe(200);
      expect((await server.request('/contacts')).status).toBe(200);
    });

    it('removes a property set to null, so that a full contact can take a new one', async () => {
      const id = await newContact({ properties: fifty });
      expect(await call('PATCH', `/contacts/${id}`, { properties: { p0: null, p1: null, fresh: 'new' } })).toMatchObject({ status: 200 });
      const { body } = await call('GET', `/contacts/${id}`);
      const { p0, p1, ...kept } = fifty;
      expect(body.properties).toEqual({ ...kept, fresh: 'new' });
      expect(await call('PATCH', `/contacts/${id}`, { properties: { never_there: null } })).toMatchObject({ status: 200 });
    });

    it('keeps every key the contract allows, __proto__ included', async () => {
      const id = await newContact();
      expect(await call('PATCH', `/contacts/${id}`, '{"properties":{"__proto__":"kept","constructor":"too"}}')).toMatchObject({ status: 200 });
      expect(JSON.parse(await (await server.request(`/contacts/${id}`)).text()).properties).toEqual(JSON.parse('{"__proto__":"kept","constructor":"too"}'));
    });

    it('keeps property values strings on create: null is refused there', async () => {
      expect(await call('POST', '/contacts', { email: 'null-prop@example.com', properties: { a: null } })).toEqual({
        status: 422,
        body: { statusCode: 422, name: 'validation_error', message: 'The `properties.a` must be a string.' },
      });
    });
  });

  describe('NUL and broken Unicode get the same 422 on both stores, naming the field', () => {
    const NUL = '\u0000';
    const email = (extra: Record<string, unknown> = {}) => ({ from: 'Acme <hi@acme.dev>', to: 'nul@example.com', subject: 'Hi', text: 'Hi', ...extra });
    const refused = (field: string, name = 'validation_error') => ({
      status: 422,
      body: { statusCode: 422, name, message: `The \`${field}\` must not contain the NUL character.` },
    });

    it('in contact bodies: create and update', async () => {
      expect(await call('POST', '/contacts', { email: 'n1@example.com', first_name: `a${NUL}b` })).toEqual(refused('first_name'));
      expect(await call('POST', '/contacts', { email: 'n2@example.com', properties: { company: `x${NUL}` } })).toEqual(refused('properties.company'));
      const id = await newContact();
      expect(await call('PATCH', `/contacts/${id}`, { last_name: NUL })).toEqual(refused('last_name'));
      expect(await call('PATCH', `/contacts/${id}`, { properties: { company: NUL } })).toEqual(refused('properties.company'));
    });

    it('in the path id of every resource, as invalid_parameter naming it', async () => {
      const id = await newContact();
      const nul = '%00';
      for (const [method, path, parameter] of [
        ['GET', `/contacts/${id}${nul}`, 'contact_id'],
        ['GET', `/contacts/a${nul}@example.com`, 'contact_id'],
        ['PATCH', `/contacts/a${nul}@example.com`, 'contact_id'],
        ['DELETE', `/contacts/a${nul}@example.com`, 'contact_id'],
        ['GET', `/broadcasts/${randomUUID()}${nul}`, 'broadcast_id'],
        ['GET', `/emails/${randomUUID()}${nul}`, 'email_id'],
        ['GET', `/templates/welcome${nul}`, 'template_id'],
        ['POST', `/templates/welcome${nul}/publish`, 'template_id'],
      ] as const) {
        const res = await call(method, path, method === 'PATCH' ? { unsubscribed: true } : undefined);
        expect(res, `${method} ${path}`).toMatchObject({ status: 422, body: { statusCode: 422, name: 'invalid_parameter', message: expect.stringContaining(`\`${parameter}\``) } });
      }
      expect(await call('GET', `/contacts?after=${nul}`)).toMatchObject({ status: 422, body: { message: expect.stringContaining('`after`') } });
    });

    it('in single sends, templates and broadcasts', async () => {
      // A subject and a header value are one line with no control characters: their own schema refuses NUL first.
      const naming = (field: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message: expect.stringContaining(`\`${field}\``) } });
      expect(await call('POST', '/emails', email({ subject: `Hi${NUL}` }))).toEqual(naming('subject'));
      expect(await call('POST', '/emails', email({ tags: [{ name: 'a', value: 'b' }], headers: { 'X-Ref': `1${NUL}` } }))).toEqual(naming('headers.X-Ref'));
      expect(await call('POST', '/templates', { name: 'T', html: `<p>${NUL}</p>` })).toEqual(refused('html'));
      expect(await call('POST', '/broadcasts', { segment_id: randomUUID(), from: 'a@acme.dev', subject: 'S', text: 'x', name: `n${NUL}` })).toEqual(refused('name'));
    });

    it('in batches: strict mode names emails[i], permissive mode reports that email and sends the rest', async () => {
      const items = [email(), email({ html: `<p>${NUL}</p>` }), email()];
      expect(await call('POST', '/emails/batch', items)).toEqual({
        status: 422,
        body: { statusCode: 422, name: 'validation_error', message: 'emails[1]: The `html` must not contain the NUL character.' },
      });
      const permissive = await call('POST', '/emails/batch', items, { 'x-batch-validation': 'permissive' });
      expect(permissive).toEqual({
        status: 200,
        body: { data: [{ id: expect.any(String) }, { id: expect.any(String) }], errors: [{ index: 1, message: 'The `html` must not contain the NUL character.' }] },
      });
    });

    it('refuses lone surrogates, which both stores would silently turn into U+FFFD (one or three)', async () => {
      expect(await call('POST', '/contacts', '{"email":"s@example.com","first_name":"a\\ud800b"}')).toEqual({
        status: 422,
        body: { statusCode: 422, name: 'validation_error', message: 'The `first_name` must not contain a lone surrogate (it is not valid Unicode).' },
      });
    });

    it('keeps other control characters, tabs and line breaks as given', async () => {
      const id = await newContact({ first_name: 'tab\there', properties: { note: 'line\r\nbreak \u0001\u001f\u007f' } });
      expect(await call('GET', `/contacts/${id}`)).toMatchObject({ body: { first_name: 'tab\there', properties: { note: 'line\r\nbreak \u0001\u001f\u007f' } } });
    });
  });

  describe('bodies nested deeper than 64 levels are refused before they are parsed', () => {
    const refused = { status: 400, body: { statusCode: 400, name: 'invalid_json', message: 'The body is nested deeper than 64 levels.' } };

    it('refuses a 3 MB body nested 1.5 million levels deep with 400 invalid_json', async () => {
      const depth = 1_500_000;
      expect(await call('POST', '/contacts', '['.repeat(depth) + ']'.repeat(depth))).toEqual(refused);
      expect(await call('POST', '/emails/batch', '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000))).toEqual(refused);
    });

    it('skips strings exactly: escaped quotes, runs of backslashes, multi-byte characters', () => {
      const deeperThanTwo = (json: string) => nestedDeeperThan(2, Buffer.from(json));
      expect(deeperThanTwo('[[]]')).toBe(false);
      expect(deeperThanTwo('[[[]]]')).toBe(true);
      expect(deeperThanTwo('[["\\"[[["]]')).toBe(false);
      expect(deeperThanTwo('[["\\\\"[]]]')).toBe(true);
      expect(deeperThanTwo('["é[[[", {"k":"}]"}]')).toBe(false);
      expect(deeperThanTwo('["unterminated [[[')).toBe(false);
    });

    it('counts only structure: 64 levels pass to the schema check, brackets inside strings do not count', async () => {
      const nested = (levels: number) => `{"email":"deep@example.com","properties":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
      expect(await call('POST', '/contacts', nested(64))).toMatchObject({ status: 422, body: { message: 'The `properties` must be an object.' } });
      expect(await call('POST', '/contacts', nested(65))).toEqual(refused);
      const name = `"\\"${'[{'.repeat(60)}\\\\`;
      expect(await call('POST', '/contacts', `{"email":"brackets@example.com","first_name":${name}"}`)).toMatchObject({ status: 201 });
    });

    it('counts the same in a UTF-16 body, and names a body of the wrong shape `body`', async () => {
      const utf16 = { 'content-type': 'application/json; charset=utf-16le' };
      const send = (text: string) => server.request('/contacts', { method: 'POST', headers: utf16, body: Buffer.from(text, 'utf16le') }).then(async (res) => ({ status: res.status, body: await res.json() }));
      expect(await send('{"email":"wide@example.com","first_name":"Zoë"}')).toMatchObject({ status: 201 });
      expect(await send('['.repeat(65) + ']'.repeat(65))).toEqual(refused);
      expect(await call('POST', '/contacts', '[]')).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: 'The `body` must be an object.' } });
    });
  });

  describe('bytes that are not text in their encoding', () => {
    const post = (bytes: Uint8Array, charset = 'utf-8') =>
      server.request('/emails', { method: 'POST', headers: { ...json, 'content-type': `application/json; charset=${charset}` }, body: new Uint8Array(bytes) }).then(async (res) => ({ status: res.status, body: await res.json() }));
    const email = (subject: Buffer, encoding: BufferEncoding = 'utf8') =>
      Buffer.concat([Buffer.from('{"from":"a@acme.dev","to":"x@example.com","text":"t","subject":"s', encoding), subject, Buffer.from('"}', encoding)]);

    it('refuses invalid UTF-8 with 400 rather than storing U+FFFD in its place, and nothing is sent', async () => {
      const before = await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      for (const bytes of [[0xff, 0xfe, 0xc3], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf]]) {
        expect(await post(email(Buffer.from(bytes)))).toEqual({ status: 400, body: { statusCode: 400, name: 'invalid_json', message: 'The body is not valid UTF-8.' } });
      }
      const after = await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      expect(Number(after.n)).toBe(Number(before.n));
      expect(await post(email(Buffer.from('ë ✓ 🎉')))).toMatchObject({ status: 200 });
    });

    it('refuses a lone UTF-16 surrogate byte pair the same way', async () => {
      expect(await post(email(Buffer.from([0x00, 0xd8]), 'utf16le'), 'utf-16le')).toEqual({ status: 400, body: { statusCode: 400, name: 'invalid_json', message: 'The body is not valid UTF-16LE.' } });
    });
  });

  describe('what a refusal names', () => {
    const email = (to: unknown) => ({ from: 'a@example.com', to, subject: 'Hi', text: 'Hi' });
    const addresses = (n: number) => Array.from({ length: n }, (_, i) => `r${i}@example.com`);

    it('names the branch of a string-or-list field that took the value: a list too long or too short is not "must be a string"', async () => {
      const refusal = (message: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
      expect(await call('POST', '/emails', email(addresses(51)))).toEqual(refusal('The `to` must have at most 50 items.'));
      expect(await call('POST', '/emails', email([]))).toEqual(refusal('The `to` must have at least one item.'));
      // No branch took a number or null: the field's own words say what it may be, not the first branch's type.
      expect(await call('POST', '/emails', email(5))).toEqual(refusal('The `to` must be one address, or up to 50 of them.'));
      expect(await call('POST', '/emails', email(null))).toEqual(refusal('The `to` must be one address, or up to 50 of them.'));
    });

    it("says a bound on length or count in a person's words, not Ajv's", async () => {
      const refusal = (message: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
      expect(await call('POST', '/segments', { name: '' })).toEqual(refusal('The `name` must not be empty.'));
      expect(await call('POST', '/segments', { name: 'x'.repeat(257) })).toEqual(refusal('The `name` must be at most 256 characters long.'));
    });

    it('says what a bare JSON value, a path that is neither id nor address, and a value of two types may be', async () => {
      const raw = (path: string, body: string) => server.request(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (res) => ({ status: res.status, body: await res.json() }));
      for (const body of ['"x"', 'null', '5', 'true']) {
        expect(await raw('/emails', body)).toEqual({ status: 400, body: { statusCode: 400, name: 'invalid_json', message: 'The body must be a JSON object (or, for a batch, an array), not a bare string, number, boolean or null.' } });
      }
      expect((await raw('/emails', '{"to":')).body.message).toBe('The body is not valid JSON.');
      expect((await call('GET', '/suppressions/not-an-address')).body.message).toBe("The `suppression` must be the suppression's id, or the suppressed address.");
      expect((await call('GET', '/contacts/a')).body.message).toBe("The `contact_id` must be the contact's id, or its email address.");
      const templated = await call('POST', '/emails', { from: 'a@example.com', to: 'b@example.com', template: { id: 'x', variables: { A: null } } });
      expect(templated.body.message).toBe('The `template.variables.A` must be a string or a number.');
    });

    it('says an update with nothing to change is empty, and what a contact property may be set to', async () => {
      const id = await newContact();
      expect(await call('PATCH', `/contacts/${id}`, {})).toEqual({ status: 422, body: { statusCode: 422, name: 'missing_required_field', message: 'The body is empty: give at least one field to change.' } });
      expect((await call('PATCH', `/contacts/${id}`, { properties: { flag: true } })).body.message).toBe('The `properties.flag` must be a string, or `null` to remove the property.');
    });

    it('names an empty query parameter, and one holding a character it must percent-encode', async () => {
      const refusal = (message: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
      for (const query of ['limit', 'limit=']) {
        expect(await call('GET', `/contacts?${query}`)).toEqual(refusal('The `limit` must not be empty: give it a value, or leave it out.'));
      }
      expect(await call('GET', '/emails?last_event=sent+x')).toEqual(refusal("The `last_event` must be percent-encoded: its value holds a character with a meaning in URLs (one of :/?#[]@!$&'()*+,;=)."));
      // Percent-encoded, the same character is only part of the value, which its schema then judges.
      expect(await call('GET', '/contacts?after=a@b')).toEqual(refusal("The `after` must be percent-encoded: its value holds a character with a meaning in URLs (one of :/?#[]@!$&'()*+,;=)."));
      expect(await call('GET', '/contacts?after=a%40b')).toEqual(refusal('The `after` must be a valid UUID.'));
    });

    it('calls a query parameter unknown when the operation declares none of that name in the query, even one named as its path parameter', async () => {
      const id = await newContact();
      for (const query of ['page=2', `contact_id=${id}`, 'page=', 'page=a+b']) {
        const name = query.split('=')[0];
        expect(await call('GET', `/contacts/${id}?${query}`), query).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `Unknown query parameter \`${name}\`.` } });
      }
    });

    it('finds the rule a field broke beside a $ref, under a key pattern, and in the rule for an object\'s keys', async () => {
      const refusal = (message: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
      const send = { from: 'a@example.com', to: 'b@example.com', subject: 'Hi', text: 'Hi' };
      // A template's `html` has `minLength: 1` beside the $ref of the HTML body it shares with a send.
      expect(await call('POST', '/templates', { name: 'bare', html: '' })).toEqual(refusal('The `html` must not be empty.'));
      // Custom headers are the body's `headers` keys that match `X-…` (patternProperties).
      expect(await call('POST', '/emails', { ...send, headers: { 'X-Note': 'a\nb' } })).toEqual(refusal('The `headers.X-Note` must be one line, with no control character but tab.'));
      expect(await call('POST', '/emails', { ...send, headers: { 'X-Note': 'x'.repeat(999) } })).toEqual(refusal('The `headers.X-Note` must be at most 998 characters long.'));
      // A contact property's key, checked by the properties' propertyNames.
      expect(await call('POST', '/contacts', { email: 'keys@example.com', properties: { 'no spaces': 'x' } })).toEqual(refusal('The `properties` must be 1 to 50 ASCII letters, digits or underscores.'));
    });

    it('says what a pattern means, in the words the contract gives beside it, rather than the regular expression', async () => {
      const refusal = (message: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
      const send = { from: 'a@example.com', to: 'b@example.com', subject: 'Hi', text: 'Hi' };
      expect(await call('POST', '/emails', { ...send, subject: 'Hi\nBcc: x@example.com' })).toEqual(refusal('The `subject` must be one line, with no control character but tab.'));
      expect(await call('POST', '/emails', { ...send, from: 'A\r\nB <a@example.com>' })).toEqual(refusal('The `from` must be free of control characters, line breaks included.'));
      expect(await call('POST', '/emails', { ...send, tags: [{ name: 'a b', value: 'c' }] })).toEqual(refusal('The `tags.0.name` must be 1 to 256 ASCII letters, digits, underscores or dashes.'));
      expect(await call('POST', '/emails/batch', [{ ...send, subject: 'Hi\n' }])).toEqual(refusal('emails[0]: The `subject` must be one line, with no control character but tab.'));
      expect(await call('POST', '/webhooks', { endpoint: 'ftp://example.com/x', events: ['email.sent'] })).toEqual(refusal('The `endpoint` must be an http:// or https:// URL.'));
      const { body: template } = await call('POST', '/templates', { name: 'patterned', html: '<p>Hi</p>' });
      const alias = 'The `alias` must be 1 to 64 lower-case ASCII letters, digits, underscores or dashes, starting with a letter or digit, and not in the form of an id.';
      expect(await call('POST', '/templates', { name: 'patterned', html: '<p>Hi</p>', alias: 'Not An Alias' })).toEqual(refusal(alias));
      expect(await call('PATCH', `/templates/${template.id}`, { alias: '-no' })).toEqual(refusal(alias));
    });

    it('names a query parameter given twice, rather than calling the pair a wrong type', async () => {
      const refusal = (message: string) => ({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
      expect(await call('GET', '/contacts?limit=1&limit=2')).toEqual(refusal('The `limit` is given more than once; give it once.'));
      expect(await call('GET', '/emails?last_event=sent&last_event=queued')).toEqual(refusal('The `last_event` is given more than once; give it once.'));
      // Given once, as a list: no "more than once".
      for (const query of ['last_event[]=sent', 'last_event%5B%5D=sent', 'last_event[0]=sent']) {
        expect(await call('GET', `/emails?${query}`), query).toEqual(refusal('The `last_event` takes one value, not a list: give it as `last_event=…`.'));
      }
      expect(await call('GET', '/emails?last_event[]=sent&last_event[]=queued')).toEqual(refusal('The `last_event` is given more than once; give it once.'));
      expect(await call('GET', '/contacts?limit=x')).toEqual(refusal('The `limit` must be an integer.'));
      // Spellings Number() would read as one, which the request check coerces with.
      for (const limit of ['0x10', '1e1', '1.0', '%201', '1%20', '%20', '%2B1']) {
        expect(await call('GET', `/emails?limit=${limit}`), limit).toEqual(refusal('The `limit` must be an integer.'));
      }
      expect((await call('GET', '/emails?limit=10')).status).toBe(200);
    });

    it('names the field a template excludes, as a batch does', async () => {
      const send = { from: 'a@example.com', to: 'b@example.com', subject: 'Hi', template: { id: randomUUID() } };
      const message = 'The field `html` cannot be combined with `template`.';
      expect(await call('POST', '/emails', { ...send, html: '<p>Hi</p>' })).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message } });
      expect(await call('POST', '/emails/batch', [{ ...send, html: '<p>Hi</p>' }])).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `emails[0]: ${message}` } });
    });

    it('answers 400 invalid_json for a body its Content-Encoding does not describe, naming the encoding', async () => {
      for (const encoding of ['gzip', 'deflate', 'br']) {
        const { status, body } = await call('POST', '/contacts', { email: 'plain@example.com' }, { 'content-encoding': encoding });
        expect({ status, name: body.name }, encoding).toEqual({ status: 400, name: 'invalid_json' });
        expect(body.message).toMatch(new RegExp(`^The body could not be decoded as its Content-Encoding, \`${encoding}\`, says: .+\\.$`));
      }
      const gzipped = await server.request('/contacts', { method: 'POST', headers: { ...json, 'content-encoding': 'gzip' }, body: gzipSync(JSON.stringify({ email: 'zipped@example.com' })) });
      expect(gzipped.status).toBe(201);
    });

    it('answers 415 naming the Content-Encoding or charset it cannot read', async () => {
      const refusal = (message: string) => ({ status: 415, body: { statusCode: 415, name: 'unsupported_media_type', message } });
      expect(await call('POST', '/contacts', { email: 'packed@example.com' }, { 'content-encoding': 'compress' })).toEqual(
        refusal('The body\'s Content-Encoding, `compress`, is not supported: send it as is, or with gzip, deflate or br.'),
      );
      expect(await call('POST', '/contacts', { email: 'latin@example.com' }, { 'content-type': 'application/json; charset=latin1' })).toEqual(refusal('The body must be JSON in UTF-8 or UTF-16, not `latin1`.'));
    });
  });
});
