// Attachments on a single send: stored apart from the email, read by the worker for that email alone,
// and delivered as real MIME to a real SMTP server on 127.0.0.1, parsed with mailparser. Bad ones are
// refused with the contract's error, and a batch refuses them by name. Files given by `path`: attachment-paths.test.ts.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { withWorker } from '../support/delivery.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';

describe.each(backends)('attachments on %s', (backend) => {
  const sink = withSink();
  const server = withServer(backend);
  const worker = withWorker(server, sink, { idleMs: 10 });

  const post = (path: string, body: unknown) => server.request(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  /** Sends `body`, runs the worker once, and answers the message the sink received for it. */
  const delivered = async (body: Record<string, unknown>) => {
    const res = await post('/emails', { from: 'Acme <team@acme.dev>', to: 'ada@example.com', subject: 'Files', ...body });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    const received = sink.received.length;
    expect(await worker.runOnce()).toBe(1);
    await sink.waitFor(received + 1);
    const message = sink.received.find((r) => r.mail.messageId === `<${id}@acme.dev>`)!;
    expect(message).toBeDefined();
    return { id, message };
  };

  it('delivers files and inline images with their bytes, names and types, the body intact beside them', async () => {
    const pdf = randomBytes(70_000);
    const png = randomBytes(3_000);
    const { id, message } = await delivered({
      html: '<p>Your invoice, and our logo: <img src="cid:logo@acme"></p>',
      attachments: [
        { filename: 'invoice-0042.pdf', content: pdf.toString('base64') },
        { filename: 'logo.png', content: png.toString('base64'), content_id: 'logo@acme' },
        // A name that needs RFC 2231, and a type given rather than derived.
        { filename: `Überweisung März ${'ü'.repeat(80)}.csv`, content: Buffer.from('a,b\n1,2\n').toString('base64'), content_type: 'text/csv' },
        { content: Buffer.from('no name').toString('base64') },
      ],
    });
    const { mail, raw } = message;
    expect(raw).toMatch(/<img src=(3D)?"cid:logo@acme">/);
    expect(mail.text).toMatch(/^Your invoice, and our logo:/);
    expect(mail.attachments).toHaveLength(4);
    const named = (start: string) => mail.attachments.find((a) => a.filename?.startsWith(start));
    const [invoice, logo, csv, unnamed] = [named('invoice'), named('logo'), named('Über'), mail.attachments.find((a) => a.filename === undefined)];
    expect(invoice!.filename).toBe('invoice-0042.pdf');
    expect(invoice!.contentType).toBe('application/pdf');
    expect(invoice!.contentDisposition).toBe('attachment');
    expect(invoice!.content.equals(pdf)).toBe(true);
    expect(logo!.filename).toBe('logo.png');
    expect(logo!.contentType).toBe('image/png');
    expect(logo!.cid).toBe('logo@acme');
    expect(logo!.contentDisposition).toBe('inline');
    expect(logo!.content.equals(png)).toBe(true);
    expect(csv!.filename).toBe(`Überweisung März ${'ü'.repeat(80)}.csv`);
    expect(csv!.contentType).toBe('text/csv');
    expect(csv!.content.toString()).toBe('a,b\n1,2\n');
    expect(unnamed!.filename).toBeUndefined();
    expect(unnamed!.contentType).toBe('application/octet-stream');
    expect(unnamed!.content.toString()).toBe('no name');
    // The inline image is related to the body; the files are mixed in after both.
    expect(raw).toMatch(/^Content-Type: multipart\/mixed;/m);
    expect(raw).toMatch(/^Content-Type: multipart\/related;/m);
    expect(raw).toMatch(/^Content-Type: multipart\/alternative;/m);
    expect(raw.split('\r\n').every((line) => line.length <= 998)).toBe(true);
    expect((await server.client.GET('/emails/{email_id}', { params: { path: { email_id: id } } })).data?.last_event).toBe('sent');
  });

  it("carries a content type's parameters to the part, as a calendar invitation needs its method", async () => {
    const invite = 'BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nEND:VCALENDAR\r\n';
    const { message } = await delivered({
      text: 'You are invited.',
      attachments: [
        { filename: 'invite.ics', content: Buffer.from(invite).toString('base64'), content_type: 'text/calendar; method=REQUEST; charset=utf-8' },
        { filename: 'data.csv', content: Buffer.from('a;b').toString('base64'), content_type: 'text/csv; header="present; quoted"' },
      ],
    });
    const [ics, csv] = message.mail.attachments;
    expect(ics!.contentType).toBe('text/calendar');
    expect(ics!.headers.get('content-type')).toMatchObject({ value: 'text/calendar', params: { method: 'REQUEST', charset: 'utf-8', name: 'invite.ics' } });
    expect(ics!.content.toString()).toBe(invite);
    expect(csv!.headers.get('content-type')).toMatchObject({ value: 'text/csv', params: { header: 'present; quoted', name: 'data.csv' } });
  });

  it('keeps a text-only email with one file a two-part message', async () => {
    const { message } = await delivered({ text: 'See the file.', attachments: [{ filename: 'notes.txt', content: Buffer.from('hello').toString('base64') }] });
    expect(message.mail.text?.trim()).toBe('See the file.');
    expect(message.mail.attachments.map((a) => [a.filename, a.contentType, a.content.toString()])).toEqual([['notes.txt', 'text/plain', 'hello']]);
    expect(message.raw).not.toMatch(/multipart\/(related|alternative)/);
  });

  it('sends a scheduled email with its attachments when its time comes', async () => {
    const res = await post('/emails', {
      from: 'team@acme.dev',
      to: 'later@example.com',
      subject: 'Later',
      text: 'Attached.',
      scheduled_at: new Date(Date.now() + 3600_000).toISOString(),
      attachments: [{ filename: 'later.txt', content: Buffer.from('later').toString('base64') }],
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    expect(await worker.runOnce()).toBe(0);
    const received = sink.received.length;
    expect(await worker.runOnce(new Date(Date.now() + 3600_000))).toBe(1);
    await sink.waitFor(received + 1);
    const message = sink.received.find((r) => r.mail.messageId === `<${id}@acme.dev>`)!;
    expect(message.mail.attachments.map((a) => a.content.toString())).toEqual(['later']);
  });

  it('lists and retrieves what was sent, each with a link that downloads its bytes without an API key', async () => {
    const pdf = randomBytes(5_000);
    const res = await post('/emails', {
      from: 'team@acme.dev',
      to: 'ada@example.com',
      subject: 'Listed',
      html: '<img src="cid:logo">',
      attachments: [
        { filename: 'Résumé "final".pdf', content: pdf.toString('base64') },
        { content: 'aGk=', content_id: 'logo', content_type: 'image/png' },
        { filename: 'c.txt', content: 'Yw==' },
      ],
    });
    const { id } = (await res.json()) as { id: string };
    const listed = await server.request(`/emails/${id}/attachments`);
    expect(listed.status).toBe(200);
    const list = (await listed.json()) as { has_more: boolean; data: Record<string, any>[] };
    expect(list.has_more).toBe(false);
    expect(list.data.map((a) => [a.filename, a.size, a.content_type, a.content_disposition, a.content_id])).toEqual([
      ['Résumé "final".pdf', 5_000, 'application/pdf', 'attachment', undefined],
      [null, 2, 'image/png', 'inline', 'logo'],
      ['c.txt', 1, 'text/plain', 'attachment', undefined],
    ]);
    const [first, second, third] = list.data as [Record<string, any>, Record<string, any>, Record<string, any>];
    expect(Date.parse(first.expires_at) - Date.now()).toBeGreaterThan(3_500_000);

    const download = await fetch(first.download_url);
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(pdf)).toBe(true);
    expect(download.headers.get('content-type')).toBe('application/octet-stream');
    expect(download.headers.get('content-disposition')).toContain("filename*=UTF-8''R%C3%A9sum%C3%A9%20%22final%22.pdf");
    expect(download.headers.get('x-content-type-options')).toBe('nosniff');

    const got = await server.request(`/emails/${id}/attachments/${second.id}`);
    expect(await got.json()).toMatchObject({ object: 'attachment', id: second.id, content_id: 'logo', size: 2 });
    expect(Buffer.from(await (await fetch(second.download_url)).arrayBuffer()).toString()).toBe('hi');

    // Pages in the order given, as every list pages.
    const page = async (query: string) => (await (await server.request(`/emails/${id}/attachments?${query}`)).json()) as { has_more: boolean; data: { id: string }[] };
    expect(await page('limit=2')).toMatchObject({ has_more: true, data: [{ id: first.id }, { id: second.id }] });
    expect(await page(`limit=2&after=${second.id}`)).toMatchObject({ has_more: false, data: [{ id: third.id }] });
    expect(await page(`limit=1&before=${third.id}`)).toMatchObject({ has_more: true, data: [{ id: second.id }] });
    const unknown = await server.request(`/emails/${id}/attachments?after=${id}`);
    expect(unknown.status).toBe(422);
    expect(await unknown.json()).toMatchObject({ message: 'The `after` attachment does not exist.' });

    // Another email's attachment, another email, a changed link, a made-up one.
    const other = (await (await post('/emails', { from: 'team@acme.dev', to: 'b@example.com', subject: 'x', text: 'x' })).json()) as { id: string };
    expect((await server.request(`/emails/${other.id}/attachments/${first.id}`)).status).toBe(404);
    expect(await (await server.request(`/emails/${other.id}/attachments`)).json()).toMatchObject({ has_more: false, data: [] });
    expect((await server.request(`/emails/01a21879-a1f3-7630-8d8e-260d71ffe92f/attachments`)).status).toBe(404);
    const token = String(first.download_url).split('/').pop()!;
    const changed = token.slice(0, 10) + (token[10] === 'A' ? 'B' : 'A') + token.slice(11);
    for (const url of [`${server.url}/attachments/${changed}`, `${server.url}/attachments/${token}x`, `${server.url}/attachments/nope`]) {
      const refused = await fetch(url);
      expect(refused.status).toBe(404);
      expect(await refused.json()).toMatchObject({ name: 'not_found' });
    }
  });

  it.each([
    ['content that is not base64', [{ filename: 'a.txt', content: 'not base64!' }], 'The `attachments.0.content` must be the file\'s bytes in base64'],
    ['base64 with line breaks', [{ filename: 'a.txt', content: 'aGVs\nbG8=' }], 'The `attachments.0.content` must be the file\'s bytes in base64'],
    ['a filename with a line break', [{ filename: 'a\r\nContent-Type: text/html', content: 'aGk=' }], 'The `attachments.0.filename` must be a name with no control characters'],
    ['a content type with a line break', [{ filename: 'a.txt', content: 'aGk=', content_type: 'text/plain;\r\n charset=utf-8' }], 'The `attachments.0.content_type` must be a media type'],
    ['a content type parameter with no value', [{ filename: 'a.txt', content: 'aGk=', content_type: 'text/plain; charset' }], 'The `attachments.0.content_type` must be a media type'],
    ['a quoted parameter with a quote in it', [{ filename: 'a.txt', content: 'aGk=', content_type: 'text/plain; x="a"b"' }], 'The `attachments.0.content_type` must be a media type'],
    ['a content id in angle brackets', [{ content: 'aGk=', content_id: '<logo>' }], 'The `attachments.0.content_id` must be 1 to 100 letters'],
    ['51 attachments', Array.from({ length: 51 }, () => ({ content: 'aGk=' })), '`attachments`'],
    ['an attachment that is not an object', ['aGk='], 'The `attachments.0` must be an object'],
  ])('refuses %s with a 422 naming the field', async (_case, attachments, message) => {
    const res = await post('/emails', { from: 'team@acme.dev', to: 'ada@example.com', subject: 'Bad', text: 'x', attachments });
    expect(res.status).toBe(422);
    const error = (await res.json()) as { name: string; message: string };
    expect(error.name).toBe('validation_error');
    expect(error.message).toContain(message);
  });

  it('refuses two inline attachments with one content id', async () => {
    const res = await post('/emails', { from: 'team@acme.dev', to: 'ada@example.com', subject: 'Bad', html: '<img src="cid:a">', attachments: [{ content: 'aGk=', content_id: 'a' }, { content: 'aGk=', content_id: 'a' }] });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { message: string }).message).toContain('`content_id` `a`');
  });

  it('refuses attachments in a batch, naming the email that has them', async () => {
    const res = await post('/emails/batch', [{ from: 'team@acme.dev', to: 'ada@example.com', subject: 'Batch', text: 'x', attachments: [{ filename: 'a.txt', content: 'aGk=' }] }]);
    expect(res.status).toBe(422);
    expect(((await res.json()) as { message: string }).message).toBe('emails[0]: The field `attachments` is not supported in a batch; send that email on its own.');
  });
});
