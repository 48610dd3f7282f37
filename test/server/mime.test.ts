// The message builder on its own: what it writes, read back by a real mail parser (mailparser), for
// awkward and generated values. End to end through a relay: test/robustness/mime.test.ts.
import fc from 'fast-check';
import { simpleParser, type AddressObject } from 'mailparser';
import { describe, expect, it } from 'vitest';
import { buildMessage, type MessageFields } from '../../server/delivery/mime.ts';

const SEED = Number(process.env.FC_SEED ?? 20261125);
const base: MessageFields = {
  messageId: '<m1@acme.dev>',
  from: { name: 'Acme', address: 'news@acme.dev' },
  to: [{ name: '', address: 'ann@example.com' }],
  subject: 'Hello',
  text: 'Hi',
  date: new Date('2026-11-25T10:00:00Z'),
};

/** The raw head (top-level headers, unfolded), by lower-cased name. */
function headNames(raw: string): string[] {
  const head = raw.slice(0, raw.indexOf('\r\n\r\n')).replace(/\r\n[ \t]/g, ' ');
  return head.split('\r\n').map((line) => line.slice(0, line.indexOf(':')).toLowerCase());
}

/** Lines that break the rules: bare CR or LF, longer than 998, or a non-ASCII byte. */
function badLines(raw: Buffer): string[] {
  const problems: string[] = [];
  if (raw.some((byte) => byte > 0x7e && byte !== 0x7f)) problems.push('a byte outside US-ASCII');
  const text = raw.toString('latin1');
  if (/\r(?!\n)|(?<!\r)\n/.test(text)) problems.push('a bare CR or LF');
  for (const line of text.split('\r\n')) if (line.length > 998) problems.push(`a line of ${line.length}`);
  return problems;
}

const addresses = (value: AddressObject | AddressObject[] | undefined) => [value ?? []].flat().flatMap((group) => group.value.map((a) => ({ name: a.name, address: a.address })));

describe('the MIME builder', () => {
  it('writes one of each structural header, ours, and drops custom headers that would replace them', async () => {
    const headers = { Bcc: 'evil@evil.test', 'CONTENT-TYPE': 'text/evil', 'Message-ID': '<evil@evil.test>', 'X-Fine': 'yes', 'Bad Name': 'x', 'X-Ünï': 'x' };
    const raw = buildMessage({ ...base, html: '<p>Hi</p>', headers });
    const names = headNames(raw.toString('latin1'));
    for (const name of ['from', 'to', 'subject', 'message-id', 'date', 'mime-version', 'content-type']) expect(names.filter((n) => n === name), name).toHaveLength(1);
    expect(names).not.toContain('bcc');
    expect(names).not.toContain('bad name');
    const mail = await simpleParser(raw);
    expect(mail.messageId).toBe('<m1@acme.dev>');
    expect(mail.headers.get('x-fine')).toBe('yes');
    expect(mail.headers.get('content-type')).toMatchObject({ value: 'multipart/alternative' });
    expect(mail.text).toBe('Hi');
    expect(mail.html).toBe('<p>Hi</p>');
    expect(mail.date?.toISOString()).toBe('2026-11-25T10:00:00.000Z');
  });

  it('keeps line breaks in a header value from starting a header', async () => {
    const raw = buildMessage({ ...base, subject: 'x\r\nBcc: h@evil.test\rX-A: 1\nX-B: 2', headers: { 'X-Note': 'y\r\nBcc: h2@evil.test' } });
    const names = headNames(raw.toString('latin1'));
    expect(names.filter((name) => ['bcc', 'x-a', 'x-b'].includes(name))).toEqual([]);
    const mail = await simpleParser(raw);
    expect(mail.subject).toBe('x Bcc: h@evil.test X-A: 1 X-B: 2');
    expect(mail.bcc).toBeUndefined();
  });

  it.each([
    ['plain ASCII with short lines', 'Hello\nthere', '7bit'],
    ['a line longer than 998', 'x'.repeat(1200), 'quoted-printable'],
    ['a trailing space', 'Hello \nthere', 'quoted-printable'],
    ['some non-ASCII', 'Grüße aus Köln', 'quoted-printable'],
    ['mostly non-ASCII', '日本語のテキストです。'.repeat(20), 'base64'],
    ['control characters', 'a\u0001b\u007fc', 'quoted-printable'],
  ])('encodes a body with %s as %s, and it reads back the same', async (_, text, encoding) => {
    const raw = buildMessage({ ...base, text });
    expect(raw.toString('latin1')).toContain(`Content-Transfer-Encoding: ${encoding}\r\n`);
    expect(badLines(raw)).toEqual([]);
    expect((await simpleParser(raw)).text).toBe(text);
  });

  it('cuts quoted-printable lines at 76 characters, escapes included', () => {
    const raw = buildMessage({ ...base, text: ('é=' + 'a '.repeat(30)).repeat(40) + ' ' }).toString('latin1');
    const body = raw.slice(raw.indexOf('\r\n\r\n') + 4);
    for (const line of body.split('\r\n')) expect(line.length, line).toBeLessThanOrEqual(76);
    expect(body.trimEnd().endsWith('=20')).toBe(true);
  });

  it('folds long headers to lines of at most 76 characters (RFC 2047), and they read back whole', async () => {
    const subject = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    const accented = 'Les nouvelles de la semaine, édition spéciale '.repeat(6).trim();
    const to = Array.from({ length: 12 }, (_, i) => ({ name: `Reader Number ${i}`, address: `reader${i}@example.com` }));
    for (const fields of [{ ...base, subject, to }, { ...base, subject: accented }]) {
      const raw = buildMessage(fields);
      const head = raw.toString('latin1').slice(0, raw.indexOf('\r\n\r\n'));
      for (const line of head.split('\r\n')) expect(line.length, line).toBeLessThanOrEqual(76);
      const parsed = await simpleParser(raw);
      expect(parsed.subject).toBe(fields.subject);
      expect(addresses(parsed.to)).toEqual(fields.to);
    }
  });

  it('never folds a header into a line of only whitespace (RFC 5322 section 4), with runs of spaces and tabs in a value', async () => {
    const subject = `${'x'.repeat(60)} ${'\t'.repeat(20)} ${'y'.repeat(70)}  ${'z'.repeat(70)}`;
    const raw = buildMessage({ ...base, subject, headers: { 'X-Note': subject } });
    const head = raw.toString('latin1').slice(0, raw.indexOf('\r\n\r\n'));
    expect(head.split('\r\n').filter((line) => /^[ \t]*$/.test(line))).toEqual([]);
    const parsed = await simpleParser(raw);
    expect(parsed.subject).toBe(subject);
  });

  it('writes structured custom headers as given, folded only at their spaces, never as encoded words', async () => {
    const url = `https://acme.dev/unsubscribe/${'t'.repeat(915)}`; // 944 characters, no space to fold at
    const references = Array.from({ length: 20 }, (_, i) => `<message-${i}@acme.dev>`).join(' ');
    const raw = buildMessage({ ...base, headers: { 'List-Unsubscribe': `<${url}>`, References: references, 'In-Reply-To': '<message-19@acme.dev>', 'X-Note': 'café' } }).toString('latin1');
    const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
    expect(head).not.toMatch(/^(List-Unsubscribe|References|In-Reply-To):.*=\?/im);
    expect(head).toContain(`List-Unsubscribe: <${url}>\r\n`);
    expect(badLines(Buffer.from(raw, 'latin1'))).toEqual([]);
    const unfolded = head.replace(/\r\n[ \t]/g, ' ');
    expect(unfolded).toContain(`References: ${references}`);
    expect(unfolded).toMatch(/^X-Note: =\?UTF-8\?B\?/m); // free text is still encoded
    const mail = await simpleParser(raw);
    expect(mail.headers.get('list')).toMatchObject({ unsubscribe: { url } });
    expect(mail.references).toEqual(references.split(' '));
  });

  it('reads back what it was given, for generated names, subjects, headers and bodies', async () => {
    // Display names as the API accepts them: no control characters, no quotes to unbalance.
    // Each as any Unicode, or as ASCII (where words, `=?`, long lines and line breaks are likelier).
    const text = (maxLength: number) => fc.oneof(fc.string({ unit: 'grapheme', maxLength }), fc.string({ maxLength }), fc.constantFrom('=?UTF-8?B?QmNj?=', 'a =?x?= b', 'tab\there'));
    const name = text(40).filter((s) => !/[\u0000-\u001f\u007f"\\]/.test(s));
    const oneLine = text(300).filter((s) => s !== '' && !/[\u0000-\u0008\u000a-\u001f\u007f]/.test(s));
    const lines = fc
      .tuple(fc.array(fc.oneof(text(200), fc.string({ minLength: 900, maxLength: 1100 })), { maxLength: 8 }), fc.constantFrom('\n', '\r\n', '\r'))
      .map(([list, lineBreak]) => list.join(lineBreak));
    const body = fc.oneof(text(3000), lines).filter((s) => !s.includes('\u0000'));
    const fields = fc.record({
      fromName: name,
      toNames: fc.array(name, { minLength: 1, maxLength: 3 }),
      subject: oneLine,
      note: oneLine,
      text: fc.option(body, { nil: undefined }),
      html: fc.option(body, { nil: undefined }),
    });
    const samples = fc.sample(fields, { seed: SEED, numRuns: 300 });
    for (const sample of samples) {
      const to = sample.toNames.map((n, i) => ({ name: n, address: `r${i}@example.com` }));
      const raw = buildMessage({ ...base, from: { name: sample.fromName, address: 'news@acme.dev' }, to, subject: sample.subject, text: sample.text, html: sample.html, headers: { 'X-Note': sample.note } });
      const what = JSON.stringify(sample).slice(0, 300);
      expect(badLines(raw), what).toEqual([]);
      const mail = await simpleParser(raw);
      // Parsers drop the spaces at the ends of a header value and of a display name.
      expect(mail.subject, what).toBe(sample.subject.trim());
      expect(addresses(mail.from), what).toEqual([{ name: sample.fromName.trim(), address: 'news@acme.dev' }]);
      expect(addresses(mail.to), what).toEqual(to.map((m) => ({ name: m.name.trim(), address: m.address })));
      // (An empty part reads back as one line break, or as nothing.)
      if (sample.text) expect(mail.text, what).toBe(sample.text.replace(/\r\n?/g, '\n'));
      if (sample.html) expect(mail.html, what).toBe(sample.html.replace(/\r\n?/g, '\n'));
      expect(headNames(raw.toString('latin1')).filter((n) => n === 'content-type'), what).toHaveLength(1);
    }
  });
});
