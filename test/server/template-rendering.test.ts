// Template rendering costs time in proportion to the template, and stays within the contract's size
// bounds. Linearity is shown by counting the scanner's character reads, never by a clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTemplate, render } from '../../server/templates/render.ts';
import { backends } from '../support/backends.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

// The attack run's input and its relatives: placeholders that open and never close, in every way.
const ADVERSARIAL = ['{{{A|', '{{{', '{', '{{{ ', '{{{A ', '{{{AAAAAAAA', '{{{A|}', '{{{A}}', '{{{A|x}}'];
const sized = (unit: string, length: number) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length);

describe('template rendering is linear in the template', () => {
  it.each(ADVERSARIAL)('reads each character of %j x N at most 6 times, at 10 KB and 100 KB alike', (unit) => {
    const small = parseTemplate(sized(unit, 10_000)).reads;
    const large = parseTemplate(sized(unit, 100_000)).reads;
    expect(small).toBeLessThanOrEqual(6 * 10_000);
    expect(large).toBeLessThanOrEqual(6 * 100_000);
    // Ten times the input, about ten times the work (a quadratic scan would be a hundred times).
    expect(large / small).toBeLessThan(11);
  });

  it('renders exactly what the placeholder grammar says', () => {
    const values = new Map<string, string | number>([['A', 'a'], ['N', 3]]);
    const declared = [{ key: 'D', type: 'string' as const, fallback_value: 'd' }];
    const cases: [string, string][] = [
      ['{{{A}}} {{{ A }}} {{{\tN\t}}}', 'a a 3'],
      ['{{{B|fallback}}} {{{B|}}} {{{D}}}', 'fallback  d'],
      ['{{{{A}}}} {{{A}} {{{A|x}}}}', '{a} {{{A}} a}'],
      ['{{{A|{{{A}}} {{{1A}}} {{{A B}}}', 'a {{{1A}}} {{{A B}}}'],
      ['<{{{A|x}y}}}>', '<{{{A|x}y}}}>'],
    ];
    for (const [source, expected] of cases) expect(render(parseTemplate(source), values, declared, { escape: false, maxLength: 1000 }), source).toBe(expected);
  });
});

describe.each(backends)('templates on %s', (backend) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(backend);
  });
  afterAll(() => server?.close());

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    server.request(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }).then(async (res) => ({ status: res.status, body: await res.json() }));
  const publish = async (alias: string, template: Record<string, unknown>) => {
    expect((await post('/templates', { name: alias, alias, ...template })).status).toBe(201);
    expect((await post(`/templates/${alias}/publish`, {})).status).toBe(200);
  };

  it('sends a batch of 20 emails with an adversarial 100 KB template, which renders as its own text', async () => {
    const html = sized('{{{A|', 100_000);
    await publish('adversarial', { from: 'a@acme.dev', subject: 'Hi {{{A|there}}}', html });
    const items = Array.from({ length: 20 }, (_, n) => ({ to: `u${n}@example.com`, template: { id: 'adversarial', variables: { A: `v${n % 2}` } } }));
    const { status, body } = await post('/emails/batch', items);
    expect(status).toBe(200);
    expect(body.data).toHaveLength(20);
    const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: body.data[3].id } } });
    expect(data).toMatchObject({ subject: 'Hi v1', html });
  });

  it('refuses a template or email body over 1,000,000 characters, naming the field', async () => {
    const big = 'x'.repeat(1_000_001);
    const template = await post('/templates', { name: 'big', html: big });
    expect(template).toMatchObject({ status: 422, body: { message: 'The `html` must be at most 1,000,000 characters long.' } });
    const email = await post('/emails', { from: 'a@acme.dev', to: 'b@example.com', subject: 's', text: big });
    expect(email).toMatchObject({ status: 422, body: { message: 'The `text` must be at most 1,000,000 characters long.' } });
  });

  it('refuses a rendering that would outgrow the bound, or put a line break into the subject', async () => {
    await publish('amplifier', { from: 'a@acme.dev', subject: 'To {{{NAME|you}}}', html: '{{{A}}}'.repeat(1000), text: 'plain' });
    for (const length of [1001, 100_000]) {
      const huge = await post('/emails', { to: 'b@example.com', template: { id: 'amplifier', variables: { A: 'x'.repeat(length) } } });
      expect(huge).toMatchObject({ status: 422, body: { message: "With these `template.variables`, the template's `html` is longer than 1000000 characters." } });
    }
    const justFits = await post('/emails', { to: 'b@example.com', template: { id: 'amplifier', variables: { A: 'x'.repeat(1000) } } });
    expect(justFits.status).toBe(200);
    const injected = await post('/emails/batch', [{ to: 'b@example.com', template: { id: 'amplifier', variables: { A: 'a', NAME: 'x\r\nBcc: h1@evil.test' } } }], { 'x-batch-validation': 'permissive' });
    await publish('bare-subject', { from: 'a@acme.dev', subject: '{{{NAME}}}', html: '<p>x</p>' });
    const empty = { to: 'b@example.com', template: { id: 'bare-subject', variables: { NAME: '' } } };
    const emptied = await post('/emails/batch', [empty, { ...empty, subject: 'Given' }], { 'x-batch-validation': 'permissive' });
    expect(emptied.body).toMatchObject({ data: [{}], errors: [{ index: 0, message: "With these `template.variables`, the template's `subject` is empty." }] });
    expect(injected.body.errors).toEqual([
      { index: 0, message: "With these `template.variables`, the template's `subject` is not one line of up to 998 characters, with no line breaks or control characters (tabs are allowed)." },
    ]);
  });
});
