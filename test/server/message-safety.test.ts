// What goes into a message: custom headers, address strings and display names can neither add a
// recipient nor rewrite the MIME. Sent through a real delivery worker to a real SMTP server on
// 127.0.0.1, which reports the RCPT TO list and the raw message; on SQLite and PostgreSQL.
import { describe, expect, it } from 'vitest';
import { composeEmail } from '../../server/emails/compose.ts';
import { backends } from '../support/backends.ts';
import { withWorker } from '../support/delivery.ts';
import { withServer } from '../support/server.ts';
import { withSink, type Received } from '../support/smtp.ts';

const STRUCTURAL = ['Bcc', 'Cc', 'To', 'From', 'Sender', 'Reply-To', 'Return-Path', 'Content-Type', 'Content-Transfer-Encoding', 'MIME-Version', 'Message-ID', 'Date'];
const spellings = (name: string) => [name, name.toLowerCase(), name.toUpperCase(), [...name].map((c, i) => (i % 2 ? c.toLowerCase() : c.toUpperCase())).join('')];
const INVALID = (field: string, value: string) => `Invalid \`${field}\` address \`${value}\`: use \`address@domain\` or \`Display Name <address@domain>\`.`;
const FAN_OUT = [
  'c1@evil.test, c2@evil.test <real@example.com>',
  'undisclosed: a@evil.test, b@evil.test;',
  'g: a@evil.test;',
  'a@evil.test;b@evil.test',
  'Joe, c2@evil.test <real@example.com>',
  'real@example.com (c3@evil.test)',
  'Name <real@example.com> c4@evil.test',
  'a@evil.test b@evil.test',
  '"x" <a@evil.test>, b@evil.test',
  'Name <a@evil.test, b@evil.test>',
  '"a@evil.test"@example.com',
];

/** The header names of the message's top-level header block, unfolded, lowercased, in order. */
function topLevelHeaders(raw: string): string[] {
  const block = raw.slice(0, raw.indexOf('\r\n\r\n'));
  return block.split('\r\n').filter((line) => !/^[ \t]/.test(line)).map((line) => line.slice(0, line.indexOf(':')).toLowerCase());
}

describe.each(backends)('message safety on %s', (backend) => {
  const server = withServer(backend);
  const sink = withSink();
  const worker = withWorker(server, sink, { maxAttempts: 1 });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    server.request(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }).then(async (res) => ({ status: res.status, body: await res.json() }));
  const countEmails = async () => Number((await server.store.database.db.selectFrom('emails').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  /** Delivers everything due and returns what the relay received for the email. */
  const deliver = async (id: string): Promise<Received> => {
    while ((await worker.runOnce()) > 0);
    const found = sink.received.filter((r) => r.mail.messageId?.startsWith(`<${id}@`));
    expect(found, `messages received for ${id}`).toHaveLength(1);
    return found[0]!;
  };
  const email = (extra: Record<string, unknown>) => ({ from: 'Acme <news@acme.dev>', to: 'ann@example.com', subject: 'Hello', text: 'Hi', ...extra });

  describe('custom headers cannot add recipients or rewrite the MIME', () => {
    it.each(STRUCTURAL)('refuses `%s` in every letter case with 422 naming it, in single sends and both batch modes', async (name) => {
      const before = await countEmails();
      for (const spelling of spellings(name)) {
        const single = await post('/emails', email({ headers: { [spelling]: 'h1@evil.test, h2@evil.test' } }));
        expect(single).toEqual({ status: 422, body: { statusCode: 422, name: 'validation_error', message: `The field \`headers.${spelling}\` is not supported.` } });
      }
      const bad = email({ headers: { 'X-Ok': '1', [name]: 'h3@evil.test' } });
      const strict = await post('/emails/batch', [email({}), bad]);
      expect(strict).toMatchObject({ status: 422, body: { message: `emails[1]: The field \`headers.${name}\` is not supported.` } });
      const permissive = await post('/emails/batch', [bad, email({})], { 'x-batch-validation': 'permissive' });
      expect(permissive.status).toBe(200);
      expect(permissive.body.errors).toEqual([{ index: 0, message: `The field \`headers.${name}\` is not supported.` }]);
      expect(await countEmails()).toBe(before + 1);
    });

    it('refuses two header names that differ only in case', async () => {
      const { status, body } = await post('/emails', email({ headers: { 'X-Ref': 'a', 'x-ref': 'b' } }));
      expect(status).toBe(422);
      expect(body.message).toBe('The header `x-ref` repeats `X-Ref`: header names are case-insensitive, give each once.');
      const batch = await post('/emails/batch', [email({ headers: { 'List-Unsubscribe': '<a>', 'list-unsubscribe': '<b>' } })], { 'x-batch-validation': 'permissive' });
      expect(batch.body.errors).toEqual([{ index: 0, message: 'The header `list-unsubscribe` repeats `List-Unsubscribe`: header names are case-insensitive, give each once.' }]);
    });

    it('refuses CR, LF and control characters in a subject or a header value', async () => {
      for (const subject of ['Hi\r\nBcc: h1@evil.test', 'Hi\nthere', 'Hi\u0000', 'Hi\u001b[0m']) {
        const { status, body } = await post('/emails', email({ subject }));
        expect(status).toBe(422);
        expect(body.message).toBe('The `subject` must be one line, with no control character but tab.');
      }
      const header = await post('/emails', email({ headers: { 'X-Note': 'a\u0000b' } }));
      expect(header.body.message).toBe('The `headers.X-Note` must be one line, with no control character but tab.');
      expect((await post('/emails', email({ subject: 'Tab\tis fine' }))).status).toBe(200);
    });

    it('delivers the allowed headers, with RCPT TO exactly to/cc/bcc and one of each structural header, ours', async () => {
      const headers = {
        'X-Entity-Ref-ID': 'order-8812',
        'list-unsubscribe': '<https://acme.dev/u/1>',
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        'In-Reply-To': '<first@acme.dev>',
        References: '<first@acme.dev>',
        Precedence: 'bulk',
        'auto-submitted': 'auto-generated',
        'Feedback-ID': 'c1:acme',
      };
      const sent = await post('/emails', email({ to: ['Ann <ann@example.com>', 'bob@example.com'], cc: 'cy@example.com', bcc: 'dee@example.com', reply_to: 'help@acme.dev', headers }));
      expect(sent.status).toBe(200);
      const { envelope, raw, mail } = await deliver(sent.body.id);
      expect(envelope.from).toBe('news@acme.dev');
      expect(envelope.to.sort()).toEqual(['ann@example.com', 'bob@example.com', 'cy@example.com', 'dee@example.com']);
      const names = topLevelHeaders(raw);
      for (const name of ['from', 'to', 'cc', 'reply-to', 'subject', 'message-id', 'date', 'mime-version', 'content-type']) {
        expect(names.filter((n) => n === name), name).toHaveLength(1);
      }
      for (const name of ['bcc', 'sender', 'return-path']) expect(names, name).not.toContain(name);
      expect(raw).not.toContain('dee@example.com');
      expect(mail.messageId).toBe(`<${sent.body.id}@acme.dev>`);
      for (const name of Object.keys(headers)) expect(names.filter((n) => n === name.toLowerCase()), name).toHaveLength(1);
      expect(mail.headers.get('x-entity-ref-id')).toBe('order-8812');
      expect(mail.headers.get('precedence')).toBe('bulk');
    });

    it('takes recipients only from to/cc/bcc even for a stored email whose headers name others', async () => {
      // As if accepted before the header rule: the envelope must still be built from the fields alone.
      const record = await composeEmail({ from: 'news@acme.dev', to: 'ann@example.com', bcc: 'dee@example.com', subject: 'Old row', text: 'x' }, async () => undefined, new Date());
      if (typeof record === 'string') throw new Error(record);
      record.headers = JSON.stringify({ Bcc: 'h1@evil.test, h2@evil.test', bCC: 'h3@evil.test', Cc: 'h4@evil.test', To: 'h5@evil.test' });
      await server.store.emails.insertMany(server.store.database.db, [record]);
      const { envelope } = await deliver(record.id);
      expect(envelope.to.sort()).toEqual(['ann@example.com', 'dee@example.com']);
    });
  });

  describe('one address string is exactly one mailbox', () => {
    it.each(FAN_OUT)('refuses %j in to, cc, bcc, reply_to and from, storing nothing', async (value) => {
      const before = await countEmails();
      for (const field of ['to', 'cc', 'bcc', 'reply_to', 'from']) {
        const { status, body } = await post('/emails', email({ [field]: field === 'from' ? value : ['ok@example.com', value] }));
        expect(status, field).toBe(422);
        expect(body.message).toBe(INVALID(field, value));
      }
      expect(await countEmails()).toBe(before);
    });

    it('reports fan-out addresses in a permissive batch by index, sending none of them', async () => {
      const { status, body } = await post('/emails/batch', [email({ to: FAN_OUT[0] }), email({ to: 'zed@example.com', cc: FAN_OUT[1] })], { 'x-batch-validation': 'permissive' });
      expect(status).toBe(200);
      expect(body).toEqual({ data: [], errors: [{ index: 0, message: INVALID('to', FAN_OUT[0]!) }, { index: 1, message: INVALID('cc', FAN_OUT[1]!) }] });
    });

    it('refuses CR, LF and control characters in an address', async () => {
      for (const to of ['ann@example.com\r\nBcc: h1@evil.test', 'Ann\u0000 <ann@example.com>']) {
        expect((await post('/emails', email({ to }))).status).toBe(422);
      }
    });

    it('quotes a refused value holding a backtick so that the message stays unambiguous', async () => {
      const { status, body } = await post('/emails', email({ from: 'D`9G <x' }));
      expect(status).toBe(422);
      expect(body.message).toBe('Invalid `from` address "D`9G <x": use `address@domain` or `Display Name <address@domain>`.');
    });

    it('delivers a quoted display name holding commas and an address to its one address only', async () => {
      const to = ['"Doe, Jane" <jane@example.com>', '"Evil <e@evil.test>, f@evil.test" <real@example.com>'];
      const sent = await post('/emails', email({ to }));
      expect(sent.status).toBe(200);
      const { envelope, mail } = await deliver(sent.body.id);
      expect(envelope.to.sort()).toEqual(['jane@example.com', 'real@example.com']);
      expect(mail.to).toMatchObject({ value: [{ name: 'Doe, Jane', address: 'jane@example.com' }, { name: 'Evil <e@evil.test>, f@evil.test', address: 'real@example.com' }] });
      const { data } = await server.client.GET('/emails/{email_id}', { params: { path: { email_id: sent.body.id } } });
      expect(data?.to).toEqual(to);
    });
  });

  describe('broadcasts and templates take mailboxes, and display names are quoted correctly', () => {
    const broadcast = (extra: Record<string, unknown>) => ({ segment_id: '78261eea-8f8b-4381-83c6-79fa7120f1cf', from: 'news@acme.dev', subject: 'News', text: 'x', ...extra });
    const template = (extra: Record<string, unknown>) => ({ name: 'T', html: '<p>x</p>', ...extra });

    it.each(['x" <a@acme.test>', 'not an address', ...FAN_OUT.slice(0, 3)])('refuses from %j on broadcasts, templates and sends', async (from) => {
      for (const [path, body] of [['/broadcasts', broadcast({ from })], ['/templates', template({ from })], ['/emails', email({ from })]] as const) {
        const { status, body: error } = await post(path, body);
        expect(status, path).toBe(422);
        expect(error.message, path).toBe(INVALID('from', from));
      }
    });

    it('refuses a reply_to that is not one mailbox on broadcasts and templates', async () => {
      const value = FAN_OUT[0]!;
      expect((await post('/broadcasts', broadcast({ reply_to: ['ok@acme.dev', value] }))).body.message).toBe(INVALID('reply_to', value));
      expect((await post('/templates', template({ reply_to: value }))).body.message).toBe(INVALID('reply_to', value));
      expect((await post('/broadcasts', broadcast({ subject: 'a\r\nb' }))).status).toBe(422);
      expect((await post('/templates', template({ subject: 'a\r\nb' }))).status).toBe(422);
    });

    it('sends a display name with an escaped quote as a valid header and a valid MAIL FROM, also through a template', async () => {
      const from = '"x\\" y" <a@acme.test>';
      const created = await post('/templates', template({ alias: `quoted-${backend}`, from, reply_to: '"Help, Desk" <help@acme.test>', subject: 'Q' }));
      expect(created.status).toBe(201);
      expect((await post(`/templates/quoted-${backend}/publish`, {})).status).toBe(200);
      const direct = await post('/emails', email({ from }));
      const templated = await post('/emails', { to: 'ann@example.com', template: { id: `quoted-${backend}` } });
      for (const id of [direct.body.id, templated.body.id]) {
        const { envelope, mail } = await deliver(id);
        expect(envelope.from).toBe('a@acme.test');
        expect(mail.from?.value).toEqual([{ name: 'x" y', address: 'a@acme.test' }]);
      }
      const { mail } = await deliver(templated.body.id);
      expect(mail.replyTo?.value).toEqual([{ name: 'Help, Desk', address: 'help@acme.test' }]);
    });
  });
});
