// Personalization of a broadcast for one contact: every placeholder form, fallbacks, escaping in html
// only, properties, the plain text made once from html, and work linear in the size of the broadcast
// (shown by counting the scanner's character reads, never by a clock).
import { describe, expect, it } from 'vitest';
import { personalize, PersonalizedTooLong, prepareBroadcast, SendingBroadcasts, type Recipient } from '../../server/broadcasts/personalize.ts';
import { parseTemplate } from '../../server/templates/render.ts';

const URL = 'https://mail.acme.dev/unsubscribe/TOKEN';
const steve: Recipient = { email: 'steve@example.com', first_name: 'Steve', last_name: 'Wozniak', properties: { plan: 'pro', company: 'Apple & Co' } };
const nameless: Recipient = { email: 'anon@example.com', first_name: null, last_name: null, properties: {} };

const render = (parts: { subject?: string; html?: string | null; text?: string | null }, recipient: Recipient = steve) =>
  personalize(prepareBroadcast({ subject: parts.subject ?? 's', html: parts.html ?? null, text: parts.text ?? null }), recipient, URL);

describe('personalize', () => {
  it('fills every placeholder form from the contact', () => {
    const text = [
      '{{{FIRST_NAME}}} {{{LAST_NAME}}} {{{EMAIL}}}',
      '{{{contact.first_name}}} {{{contact.last_name}}} {{{contact.email}}}',
      '{{{plan}}} {{{contact.plan}}} {{{ contact.company }}}',
      '{{{RESEND_UNSUBSCRIBE_URL}}}',
    ].join('\n');
    expect(render({ text }).text).toBe(['Steve Wozniak steve@example.com', 'Steve Wozniak steve@example.com', 'pro pro Apple & Co', URL].join('\n'));
  });

  it('uses the fallback when a value is missing or empty, and nothing when there is no fallback', () => {
    const text = 'Hi {{{FIRST_NAME|there}}}, {{{contact.last_name|friend}}}; [{{{LAST_NAME}}}] [{{{plan}}}] [{{{nope|x}}}] [{{{nope}}}]';
    expect(render({ text }, nameless).text).toBe('Hi there, friend; [] [] [x] []');
    expect(render({ text }, { ...nameless, first_name: '' }).text).toBe('Hi there, friend; [] [] [x] []');
    expect(render({ text }).text).toBe('Hi Steve, Wozniak; [Wozniak] [pro] [x] []');
  });

  it('escapes values and fallbacks in html, never in subject or text', () => {
    const hostile: Recipient = { email: 'x@example.com', first_name: '<script>alert(1)</script>', last_name: '"quoted" & \'single\'', properties: {} };
    const parts = { subject: 'For {{{FIRST_NAME}}} {{{LAST_NAME}}}', html: '<p title="{{{LAST_NAME}}}">{{{FIRST_NAME}}} {{{nope|<b>}}}</p>', text: '{{{FIRST_NAME}}} {{{LAST_NAME}}}' };
    const out = render(parts, hostile);
    expect(out.html).toBe('<p title="&quot;quoted&quot; &amp; &#39;single&#39;">&lt;script&gt;alert(1)&lt;/script&gt; &lt;b&gt;</p>');
    expect(out.subject).toBe('For <script>alert(1)</script> "quoted" & \'single\'');
    expect(out.text).toBe('<script>alert(1)</script> "quoted" & \'single\'');
  });

  it('keeps the subject one line whatever a value holds', () => {
    expect(render({ subject: 'Hi {{{FIRST_NAME}}}!' }, { ...steve, first_name: 'Eve\r\nBcc: victim@example.com' }).subject).toBe('Hi Eve Bcc: victim@example.com!');
  });

  it('puts the preview text first in the body, hidden and escaped, and leaves it out of the plain text made from the html', () => {
    const hidden = (html: string) => /<div style="display:none;[^"]*">Sale &lt;today&gt; &amp; more<\/div>/.exec(html)?.index;
    const preview_text = 'Sale <today> & more';
    const bare = personalize(prepareBroadcast({ subject: 's', html: '<p>Hi {{{FIRST_NAME|there}}}</p>', text: null, preview_text }), steve, URL);
    expect(hidden(bare.html!)).toBe(0);
    expect(bare.html).toContain('<p>Hi Steve</p>');
    expect(bare.text).not.toContain('Sale');
    const page = personalize(prepareBroadcast({ subject: 's', html: '<html><head><title>t</title></head><body class="x"><p>Hi</p></body></html>', text: null, preview_text }), steve, URL);
    expect(hidden(page.html!)).toBe(page.html!.indexOf('<body class="x">') + '<body class="x">'.length);
    expect(personalize(prepareBroadcast({ subject: 's', html: '<p>Hi</p>', text: null, preview_text: null }), steve, URL).html).toBe('<p>Hi</p>');
  });

  it('fills the preview text\'s placeholders for each contact, values escaped as in the body', () => {
    const prepared = prepareBroadcast({ subject: 's', html: '<p>Hello</p>', text: null, preview_text: 'Hi {{{FIRST_NAME|there}}} & {{{plan}}}' });
    expect(personalize(prepared, steve, URL).html).toMatch(/^<div style="display:none;[^"]*">Hi Steve &amp; pro<\/div><p>Hello<\/p>$/);
    expect(personalize(prepared, nameless, URL).html).toContain('>Hi there &amp; </div>');
    expect(personalize(prepared, { ...steve, first_name: '<b>' }, URL).html).toContain('>Hi &lt;b&gt; &amp; pro</div>');
  });

  it('reads own properties only, and leaves text that is not a placeholder alone', () => {
    const text = '[{{{constructor}}}] [{{{__proto__}}}] [{{{contact.toString}}}] {{{contact.}}} {{{.x}}} {{{contact.plan.x}}} {{ plan }} {{{FIRST_NAME}}';
    // `contact.` and `contact.plan.x` are placeholders naming no property: empty, like any other.
    expect(render({ text }).text).toBe('[] [] []  {{{.x}}}  {{ plan }} {{{FIRST_NAME}}');
  });

  it('makes plain text from html once, placeholders kept (in links, in headings, in wrapped lines)', () => {
    const html = `<h1>Hello {{{contact.first_name|there}}}</h1><p>${'word '.repeat(14)}{{{FIRST_NAME|my dear friend}}}</p><a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a>`;
    const prepared = prepareBroadcast({ subject: 's', html, text: null });
    expect(prepared.text).toContainEqual({ name: 'RESEND_UNSUBSCRIBE_URL', fallback: undefined });
    const forSteve = personalize(prepared, steve, URL).text!;
    expect(forSteve).toContain('Hello Steve');
    expect(forSteve).toContain(`Unsubscribe [${URL}]`);
    expect(personalize(prepared, nameless, URL).text).toContain('my dear friend');
    // The source's own private-use characters cannot pass for a placeholder.
    const spoof = prepareBroadcast({ subject: 's', html: '<p>\uE0000\uE001 {{{EMAIL}}}</p>', text: null });
    expect(personalize(spoof, steve, URL).text).toBe('\uFFFD0\uFFFD steve@example.com');
  });

  it('sends no plain text part when the broadcast says so, and none is made without html', () => {
    expect(render({ html: '<p>x</p>', text: '' }).text).toBeNull();
    expect(render({ text: 'only text' }).html).toBeNull();
  });

  it('stops a personalized part that would grow past its bound', () => {
    const long: Recipient = { ...steve, properties: { big: 'x'.repeat(1000) } };
    expect(() => render({ text: '{{{big}}}'.repeat(6_000) }, long)).toThrow(PersonalizedTooLong);
  });

  it('parses in reads linear in the size of the broadcast, dotted names included', () => {
    for (const unit of ['{{{contact.', '{{{contact.a|', '{{{a.b.c.', '{{{.']) {
      const small = parseTemplate(unit.repeat(1_000), { dotted: true }).reads;
      const large = parseTemplate(unit.repeat(10_000), { dotted: true }).reads;
      expect(large).toBeLessThanOrEqual(6 * unit.length * 10_000);
      expect(large / small).toBeLessThan(11);
    }
  });

  it('templates keep reading a dotted name as text', () => {
    expect(parseTemplate('{{{contact.first_name}}}').parts).toEqual(['{{{contact.first_name}}}']);
    expect(parseTemplate('{{{contact.first_name}}}', { dotted: true }).parts).toEqual([{ name: 'contact.first_name', fallback: undefined }]);
  });

  it('parses each broadcast once, and keeps a bounded number', () => {
    const cache = new SendingBroadcasts(2);
    const record = (id: string) => ({ id, segment_id: 's', topic_id: null, subject: id, html: null, text: 't', preview_text: null });
    const first = cache.add(record('a'));
    expect(cache.get('a')).toBe(first);
    cache.add(record('b'));
    cache.get('a'); // used: b is now the least recently used
    cache.add(record('c'));
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(first);
    expect(cache.get('c')?.prepared.subject).toEqual(['c']);
  });
});
