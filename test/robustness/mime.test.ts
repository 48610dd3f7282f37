// Hostile addresses, subjects and custom headers, sent through the API, a real delivery worker and a
// real SMTP server on 127.0.0.1. Whatever the API accepts must reach exactly the recipients it stored
// in to/cc/bcc (no header, no comma, no group adds one), as a message whose structure (From, To,
// Subject, Message-ID, Date, MIME-Version, Content-Type) is ours, once each; and must end sent.
// Whatever it refuses must be a 422 naming the field. Known attacks first, then generated ones.
import fc from 'fast-check';
import addressparser from 'nodemailer/lib/addressparser';
import { describe, expect, it } from 'vitest';
import { backends } from '../support/backends.ts';
import { withWorker } from '../support/delivery.ts';
import { withServer } from '../support/server.ts';
import { withSink } from '../support/smtp.ts';
import { address, ADDRESS_ATTACKS, mailbox, stringAttacks, swapCase } from './arbitraries.ts';

const SEED = Number(process.env.FC_SEED ?? 20261121);
const RUNS = Number(process.env.FC_RUNS ?? 500) / 5;
const ROUNDS = 12;
/** Short claims, and each round five seconds "later": every round may retry whatever the last left. */
const DELIVERY = { idleMs: 10, retryBaseMs: 10, maxAttempts: 3, leaseMs: 1_000 };

/** Headers that make up a message's structure or its recipients: only the API's own fields may set them. */
const STRUCTURAL = ['From', 'To', 'Cc', 'Bcc', 'Reply-To', 'Sender', 'Return-Path', 'Subject', 'Message-ID', 'Date', 'MIME-Version', 'Content-Type', 'Content-Transfer-Encoding'];
const ONCE = ['from', 'to', 'subject', 'message-id', 'date', 'mime-version', 'content-type'];
const NEVER = ['bcc', 'sender', 'return-path'];
const EVIL: Record<string, string> = { 'Content-Type': 'text/html; charset=evil', 'Content-Transfer-Encoding': 'base64', 'MIME-Version': '2.0', 'Message-ID': '<evil@evil.test>', Date: 'Thu, 01 Jan 1970 00:00:00 +0000', Subject: 'evil' };

type Email = Record<string, unknown>;
const base = (n: number | string): Email => ({ from: 'Acme <news@acme.dev>', to: `real${n}@example.com`, subject: `mime ${n}`, text: 'hello' });

function knownAttacks(): Email[] {
  const out: Email[] = [{ ...base('bcc-twins'), headers: { Bcc: 'h1@evil.test', bCC: 'h2@evil.test' } }];
  for (const name of STRUCTURAL) {
    const value = (i: number) => EVIL[name] ?? `h${i}@evil.test`;
    out.push({ ...base(name), headers: { [name]: value(1), [swapCase(name)]: value(2) } });
    out.push({ ...base(`${name}-lower`), headers: { [name.toLowerCase()]: value(3) } });
    out.push({ ...base(`${name}-upper`), headers: { [name.toUpperCase()]: value(4), 'X-Fine': 'yes' } });
  }
  for (const attack of ADDRESS_ATTACKS) {
    out.push({ ...base('to'), to: attack }, { ...base('cc'), cc: [attack] }, { ...base('bcc'), bcc: attack }, { ...base('from'), from: attack });
  }
  out.push(
    { ...base('subject-crlf'), subject: 'x\r\nBcc: h@evil.test' },
    { ...base('subject-lf'), subject: 'x\nBcc: h@evil.test' },
    { ...base('header-crlf'), headers: { 'X-Note': 'x\r\nBcc: h@evil.test' } },
    { ...base('header-name'), headers: { 'Bcc: h@evil.test\r\nX': 'y' } },
    { ...base('reply-to'), reply_to: 'c1@evil.test, c2@evil.test <real@example.com>' },
    // Nested so deep that generating the plain-text part overflows a recursive converter: it must end
    // failed with its reason, not stay queued forever.
    { ...base('deep-html'), text: undefined, html: '<b>'.repeat(20_000) + 'x' },
  );
  return out;
}

const hostileEmail: fc.Arbitrary<Email> = fc
  .record(
    {
      from: fc.oneof(mailbox, stringAttacks),
      to: fc.oneof(mailbox, fc.constantFrom(...ADDRESS_ATTACKS), fc.array(fc.oneof(mailbox, fc.constantFrom(...ADDRESS_ATTACKS)), { minLength: 1, maxLength: 3 })),
      cc: fc.oneof(mailbox, fc.constantFrom(...ADDRESS_ATTACKS)),
      bcc: fc.array(fc.oneof(mailbox, stringAttacks), { minLength: 1, maxLength: 2 }),
      reply_to: fc.oneof(mailbox, fc.constantFrom(...ADDRESS_ATTACKS)),
      subject: fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), stringAttacks),
      headers: fc.dictionary(
        fc.oneof(fc.constantFrom(...STRUCTURAL).chain((n) => fc.constantFrom(n, n.toLowerCase(), n.toUpperCase(), swapCase(n))), fc.stringMatching(/^X-[A-Za-z-]{1,12}$/)),
        fc.oneof(fc.constant('h@evil.test'), fc.constantFrom(...ADDRESS_ATTACKS), stringAttacks),
        { maxKeys: 3, noNullPrototype: true },
      ),
    },
    { requiredKeys: ['from', 'to', 'subject'] },
  )
  .map((email) => ({ ...email, text: 'generated' }));

/**
 * Emails that are valid but awkward: quoted display names holding commas, `<`, `@` and escaped quotes,
 * non-ASCII names and subjects, several recipients per field, and allowed headers whose values look like
 * addresses. These must be accepted and reach exactly their recipients, so the accepting path is
 * attacked as hard as the refusing one.
 */
const quotedName = fc
  .stringMatching(/^[A-Za-zÀ-ÿ0-9 ,<>@;:.()\[\]'-]{1,24}$/)
  .map((name) => `"${name.replaceAll('\\', '').replaceAll('"', '\\"')}"`);
const awkwardMailbox = fc.oneof(mailbox, fc.tuple(quotedName, address).map(([name, addr]) => `${name} <${addr}>`));
const awkwardEmail: fc.Arbitrary<Email> = fc
  .record(
    {
      from: awkwardMailbox,
      to: fc.array(awkwardMailbox, { minLength: 1, maxLength: 4 }),
      cc: fc.array(awkwardMailbox, { minLength: 1, maxLength: 3 }),
      bcc: fc.array(awkwardMailbox, { minLength: 1, maxLength: 3 }),
      reply_to: awkwardMailbox,
      subject: fc.stringMatching(/^[A-Za-zÀ-ÿ0-9 ,<>@;:"'=?-]{1,60}$/).filter((t) => t.trim().length > 0),
      headers: fc.dictionary(
        fc.oneof(fc.stringMatching(/^X-[A-Za-z-]{1,12}$/), fc.constantFrom('List-Unsubscribe', 'In-Reply-To', 'References', 'List-Id')),
        fc.oneof(fc.constant('<h@evil.test>'), fc.constant('Bcc: h@evil.test'), fc.stringMatching(/^[ -~]{0,40}$/)),
        { maxKeys: 3, noNullPrototype: true },
      ),
    },
    { requiredKeys: ['from', 'to', 'subject'] },
  )
  .map((email) => ({ ...email, text: 'generated' }));

/** Header names and how often each occurs at the top level of a raw message (before the first blank line). */
function topLevelHeaders(raw: string): Map<string, number> {
  const head = raw.split(/\r?\n\r?\n/, 1)[0]!.replace(/\r?\n[ \t]/g, ' ');
  const counts = new Map<string, number>();
  for (const line of head.split(/\r?\n/)) {
    const name = /^([^:\s]+):/.exec(line)?.[1]?.toLowerCase();
    if (name) counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  return counts;
}

const addresses = (list: string[] | null | undefined) => (list ?? []).flatMap((m) => addressparser(m, { flatten: true }).map((a) => a.address.toLowerCase()));
const sameSet = (a: string[], b: string[]) => JSON.stringify([...new Set(a)].sort()) === JSON.stringify([...new Set(b)].sort());

describe.each(backends)('robustness MIME on %s', (backend) => {
  const server = withServer(backend, { config: { rateLimitPerSecond: 0 } });
  const sink = withSink();
  const worker = withWorker(server, sink, DELIVERY);

  it('delivers what it accepts to exactly its recipients, with a structure of its own, and refuses the rest by name', async () => {
    const violations: string[] = [];
    const statuses: Record<number, number> = {};
    const accepted = new Map<string, Email>();
    // A template whose subject takes a variable: a value with CR/LF must not become a header either.
    await server.request('/templates', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'mime', alias: 'mime-attack', subject: 'Hi {{{NAME}}}', from: 'Acme <news@acme.dev>', html: '<p>{{{NAME}}}</p>' }) });
    await server.request('/templates/mime-attack/publish', { method: 'POST' });
    const templated = [{ to: 'real-template@example.com', template: { id: 'mime-attack', variables: { NAME: 'x\r\nBcc: h@evil.test' } } }];
    const emails = [...knownAttacks(), ...templated, ...fc.sample(hostileEmail, { seed: SEED, numRuns: RUNS }), ...fc.sample(awkwardEmail, { seed: SEED, numRuns: RUNS })];

    for (const email of emails) {
      const res = await server.request('/emails', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(email) });
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      const body = await res.json();
      if (res.status === 200) accepted.set(body.id, email);
      else if (res.status !== 422) violations.push(`${JSON.stringify(email).slice(0, 160)} -> ${res.status} ${JSON.stringify(body)}`);
      else if (!Object.keys(email).some((field) => body.message?.includes(`\`${field}`))) violations.push(`422 without naming the field: ${body.message} for ${JSON.stringify(email).slice(0, 160)}`);
    }

    // Deliver. Time is moved on each round so that retries and expired claims come due at once; a round
    // ends once each of its emails has (a failed round too). An email still pending after more attempts
    // than allowed will not get anywhere: stop there.
    let roundErrors = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const pending = await server.store.database.db.selectFrom('emails').select('attempts').where('last_event', 'in', ['queued', 'delivery_delayed']).execute();
      if (!pending.some((e) => e.attempts <= DELIVERY.maxAttempts + 1)) break;
      const failed = await worker.runOnce(new Date(Date.now() + round * 5_000)).then(() => false, () => true);
      if (failed) roundErrors++;
    }

    let delivered = 0;
    let duplicates = 0;
    for (const [id, asked] of accepted) {
      const stored = await (await server.request(`/emails/${id}`)).json();
      const what = `email ${JSON.stringify(asked).slice(0, 140)}`;
      if (stored.last_event !== 'sent') {
        const row = await server.store.emails.find(id);
        // The one accepted email that may end undelivered: one whose message cannot be built (its plain
        // text overflows the converter), failed at once with that reason rather than retried forever.
        if (stored.last_event === 'failed' && /could not be built/.test(row?.last_error ?? '') && asked.subject === 'mime deep-html') continue;
        violations.push(`${what}: ${stored.last_event} after ${row?.attempts} attempts: ${row?.last_error ?? ''}`.slice(0, 400));
        continue;
      }
      const copies = sink.received.filter((r) => r.mail.messageId === `<${id}@${/@([^>\s]+)>?\s*$/.exec(stored.from)?.[1]}>` || r.raw.includes(id));
      if (copies.length === 0) {
        violations.push(`${what}: delivered, but no message carries its id`);
        continue;
      }
      delivered++;
      duplicates += copies.length - 1;
      const { envelope, mail, raw } = copies[0]!;
      const recipients = [...addresses(stored.to), ...addresses(stored.cc), ...addresses(stored.bcc)];
      const rcpt = envelope.to.map((a) => a.toLowerCase());
      if (!sameSet(rcpt, recipients)) violations.push(`${what}: RCPT TO ${JSON.stringify(rcpt)}, stored to/cc/bcc ${JSON.stringify(recipients)}`);
      const whole = new Set([...stored.to, ...(stored.cc ?? []), ...(stored.bcc ?? [])].map((m: string) => m.toLowerCase()));
      for (const r of rcpt) if (r.includes('evil.test') && !whole.has(r)) violations.push(`${what}: hidden recipient ${r} (not one whole mailbox of to/cc/bcc)`);
      const counts = topLevelHeaders(raw);
      for (const name of ONCE) if (counts.get(name) !== 1) violations.push(`${what}: ${counts.get(name) ?? 0} ${name} headers`);
      for (const name of NEVER) if (counts.has(name)) violations.push(`${what}: has a ${name} header`);
      if ((counts.get('cc') ?? 0) > 1 || (counts.get('reply-to') ?? 0) > 1 || (counts.get('content-transfer-encoding') ?? 0) > 1) violations.push(`${what}: repeated headers ${JSON.stringify([...counts])}`);
      if (!sameSet(addresses([mail.from?.text ?? '']), addresses([stored.from]))) violations.push(`${what}: From ${mail.from?.text}, stored ${stored.from}`);
      if (!sameSet(addresses([].concat((mail.to as any)?.text ?? [])), addresses(stored.to))) violations.push(`${what}: To ${JSON.stringify((mail.to as any)?.text)}, stored ${JSON.stringify(stored.to)}`);
      // Whitespace at the ends of a header value is not significant, and parsers drop it.
      if (mail.subject?.trim() !== stored.subject.trim()) violations.push(`${what}: Subject ${JSON.stringify(mail.subject)}, stored ${JSON.stringify(stored.subject)}`);
      if (!mail.messageId?.startsWith(`<${id}@`)) violations.push(`${what}: Message-ID ${mail.messageId}`);
    }

    console.log(
      `robustness mime ${backend}: seed ${SEED}, ${emails.length} emails sent, statuses ${JSON.stringify(statuses)}, ${accepted.size} accepted, ${delivered} delivered and checked, ${duplicates} duplicate deliveries, ${roundErrors} delivery rounds failed, violations: ${violations.length}`,
    );
    if (violations.length) console.log(`robustness mime ${backend} violations:\n  ${violations.slice(0, 40).join('\n  ')}`);
    expect(violations).toEqual([]);
  });
});
