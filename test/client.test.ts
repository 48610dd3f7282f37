// The client skeleton: typed calls to the three seed operations, with the bearer key on every request.
// A recording server on 127.0.0.1 stands in for Mailroom; the server itself is tested elsewhere.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMailroomClient, type MailroomClient, type OperationResult } from '../client/index.ts';

type Recorded = { method: string; url: string; headers: IncomingMessage['headers']; body: string };
const received: Recorded[] = [];
let server: Server;
let client: MailroomClient;

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  client = createMailroomClient({ apiKey: 're_test_123', baseUrl: `http://127.0.0.1:${port}` });
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const last = () => received.at(-1)!;

describe('createMailroomClient', () => {
  it('lists contacts with a limit and a cursor, sending the bearer key', async () => {
    const after = 'e169aa45-1ecf-4183-9955-b1499d5701d3';
    const { response } = await client.GET('/contacts', { params: { query: { limit: 10, after } } });
    expect(response.status).toBe(200);
    expect(last()).toMatchObject({ method: 'GET', url: `/contacts?limit=10&after=${after}` });
    expect(last().headers.authorization).toBe('Bearer re_test_123');

    // @ts-expect-error `limit` is a number in the contract, not a string
    await client.GET('/contacts', { params: { query: { limit: '10' } } });
    // @ts-expect-error `cursor` is no parameter of listContacts
    await client.GET('/contacts', { params: { query: { cursor: after } } });
  });

  it('sends a batch as a bare JSON array with the idempotency and validation headers', async () => {
    const batch = [
      { from: 'Acme <onboarding@acme.dev>', to: ['steve@example.com'], subject: 'Hi', html: '<p>Hi</p>' },
      { from: 'onboarding@acme.dev', to: 'ada@example.com', subject: 'Hello', text: 'Hello' },
    ];
    await client.POST('/emails/batch', {
      params: { header: { 'Idempotency-Key': 'batch-1', 'x-batch-validation': 'permissive' } },
      body: batch,
    });
    expect(last()).toMatchObject({ method: 'POST', url: '/emails/batch' });
    expect(JSON.parse(last().body)).toEqual(batch);
    expect(last().headers['idempotency-key']).toBe('batch-1');
    expect(last().headers['x-batch-validation']).toBe('permissive');
    expect(last().headers['content-type']).toBe('application/json');

    // @ts-expect-error `recipients` is not a field of an email; `to` is
    await client.POST('/emails/batch', { body: [{ from: 'a@b.co', recipients: ['c@d.co'], subject: 's' }] });
    // @ts-expect-error the validation mode is `strict` or `permissive`
    await client.POST('/emails/batch', { params: { header: { 'x-batch-validation': 'lenient' } }, body: batch });
  });

  it('retrieves a broadcast by id in the path', async () => {
    const id = '559ac32e-9ef5-46fb-82a1-b76b840c0f7b';
    const { data } = await client.GET('/broadcasts/{broadcast_id}', { params: { path: { broadcast_id: id } } });
    expect(last()).toMatchObject({ method: 'GET', url: `/broadcasts/${id}` });
    // The response is typed from the contract: audience_id is there, a misspelling is not.
    const segment: string | undefined = data?.audience_id;
    expect(segment).toBeUndefined();
    // @ts-expect-error `audienceId` is not a field of Broadcast
    expect(data?.audienceId).toBeUndefined();
    // @ts-expect-error the path parameter is `broadcast_id`
    await client.GET('/broadcasts/{broadcast_id}', { params: { path: { id } } });
  });

  it("types each helper's result by its operation: claiming another operation's result does not compile", async () => {
    // Helpers are written this way: the raw call's inferred result under the operation's annotation, uncast.
    const getContact = (id: string): Promise<OperationResult<'getContact'>> => client.GET('/contacts/{contact_id}', { params: { path: { contact_id: id } } });
    // @ts-expect-error a contact is not a broadcast
    const misnamed = (id: string): Promise<OperationResult<'getBroadcast'>> => client.GET('/contacts/{contact_id}', { params: { path: { contact_id: id } } });
    const helper: (id: string) => Promise<OperationResult<'getContact'>> = client.contacts.get;
    // @ts-expect-error the contacts.get helper answers a contact
    const wrong: (id: string) => Promise<OperationResult<'getBroadcast'>> = client.contacts.get;
    expect([getContact, misnamed, helper, wrong].every((f) => typeof f === 'function')).toBe(true);
  });
});
