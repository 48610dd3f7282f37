// The plain-text part made from an email's HTML: the last body's text is kept, since a batch often
// sends one body to many recipients; a different body must never get it.
import { compile } from 'html-to-text';
import { describe, expect, it } from 'vitest';
import { plainText } from '../../server/delivery/message.ts';

const fresh = compile({ wordwrap: 78 });

describe('the plain-text part', () => {
  it('is the text of the very body given, whichever body came before', () => {
    const bodies = ['<p>Hello <b>Ada</b></p>', '<p>Hello <b>Bob</b></p>', '<p>Hello <b>Ada</b></p>', '<p>Hello <b>Ada</b></p>', `<p>${'Long line of news. '.repeat(20)}<a href="https://acme.dev/x">more</a></p>`, '<p>Hello <b>Bob</b></p>'];
    const texts = bodies.map((html) => plainText(html));
    expect(texts).toEqual(bodies.map((html) => fresh(html)));
    expect(texts[0]).toBe('Hello Ada');
    expect(texts[1]).toBe('Hello Bob');
  });
});
