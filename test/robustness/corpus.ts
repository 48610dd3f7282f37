// Requests that broke the server once (an attacker run found each), replayed at the start of every
// fuzz run so that none of those failures can come back unnoticed, however the generator's luck falls.
// Each only has to be answered within the contract; what it did is then read back like anything else.
import { TEST_KEY } from '../support/server.ts';
import type { Plan } from './traffic.ts';

const json = { contentType: 'application/json', auth: `Bearer ${TEST_KEY}` };
const plan = (operationId: string, parts: Partial<Plan> = {}): Plan => ({ operationId, path: {}, query: [], headers: [], ...json, ...parts });
const literal = (value: unknown) => ({ value });
const properties = (prefix: string, n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, 'x']));

export function knownAttacks(): Plan[] {
  return [
    // Addresses the request check let in and the response check refused: then every list failed.
    ...['a@localhost', 'a..b@example.com', '.lead@example.com', 'trail.@example.com', 'a@-x.dev'].map((email) => plan('createContact', { body: { json: { email } } })),
    // Two merges of 30 properties each: 60 stored where the schema allows 50, then every read failed.
    plan('createContact', { body: { json: { email: 'many-properties@example.com', properties: properties('p', 30) } } }),
    plan('updateContact', { path: { contact_id: literal('many-properties@example.com') }, body: { json: { properties: properties('q', 30) } } }),
    // NUL: SQLite stores it, PostgreSQL refuses it (22021); both must answer the same, and not 500.
    plan('createContact', { body: { json: { email: 'nul@example.com', first_name: 'a\u0000b', properties: { k: 'v\u0000' } } } }),
    plan('updateContact', { path: { contact_id: { existing: 0, alias: false } }, body: { json: { last_name: '\u0000' } } }),
    plan('getContact', { path: { contact_id: literal('x\u0000@example.com') } }),
    plan('deleteContact', { path: { contact_id: literal('\u0000') } }),
    plan('listContacts', { query: [['after', literal('\u0000')]] }),
    plan('getEmail', { path: { email_id: literal('e169aa45-1ecf-4183-9955-b1499d5701d\u0000') } }),
    plan('getTemplate', { path: { template_id: literal('a\u0000') } }),
    plan('sendEmail', { body: { json: { from: 'a@acme.dev', to: 'b@example.com', subject: 'x\u0000', text: 'y\u0000' } } }),
    plan('sendBatchEmails', { body: { json: [{ from: 'a@acme.dev', to: 'b@example.com', subject: 'ok', text: 'z' }, { from: 'a@acme.dev', to: 'b@example.com', subject: 'x', text: '\u0000' }] }, headers: [['x-batch-validation', 'permissive']] }),
    plan('createTemplate', { body: { json: { name: 'nul\u0000', html: '<p>\u0000</p>' } } }),
    plan('createBroadcast', { body: { json: { segment_id: '78261eea-8f8b-4381-83c6-79fa7120f1cf', from: 'a@acme.dev', subject: 's', text: 't', name: '\u0000' } } }),
    // One string, several recipients; a quote that ends a display name early; addresses that are not.
    plan('sendEmail', { body: { json: { from: 'a@acme.dev', to: 'c1@evil.test, c2@evil.test <real@example.com>', subject: 's', text: 't' } } }),
    plan('sendEmail', { body: { json: { from: 'x" <a@acme.test>', to: 'g: a@evil.test, b@evil.test;', subject: 's', text: 't' } } }),
    plan('createBroadcast', { body: { json: { segment_id: '78261eea-8f8b-4381-83c6-79fa7120f1cf', from: 'not an address', reply_to: 'c1@evil.test, c2@evil.test <real@example.com>', subject: 's', text: 't' } } }),
    plan('createTemplate', { body: { json: { name: 't', html: '<p>x</p>', from: 'x" <a@acme.test>', reply_to: ['g: a@evil.test, b@evil.test;'] } } }),
    // A limit Ajv coerces to a number that is not finite, and then checks no further: every list failed
    // in SQL. Lists under another resource take one that exists.
    ...[
      ['listEmails'], ['listContacts'], ['listSegments'], ['listTopics'], ['listAudiences'], ['listBroadcasts'], ['listTemplates'], ['listSuppressions'], ['listWebhooks'], ['listApiKeys'],
      ['listSegmentContacts', 'segment_id'], ['listContactSegments', 'contact_id'], ['listContactTopics', 'contact_id'], ['listAudienceContacts', 'audience_id'],
    ].flatMap(([operationId, parent]) =>
      ['Infinity', '-Infinity', '1e400'].map((limit) => plan(operationId!, { path: parent ? { [parent]: { existing: 0, alias: false } } : {}, query: [['limit', literal(limit)]] })),
    ),
    // Bodies nested far deeper than any real request.
    plan('createContact', { body: { raw: '['.repeat(300_000) + ']'.repeat(300_000) } }),
    plan('sendBatchEmails', { body: { raw: '{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000) } }),
  ];
}
