// The plain-text part made from an email's HTML: tables read row by row, headings as written, and
// the last body's text kept, since a batch often sends one body to many recipients; a different body
// must never get it.
import { describe, expect, it } from 'vitest';
import { plainText } from '../../server/delivery/message.ts';

describe('the plain-text part', () => {
  it('is the text of the very body given, whichever body came before', () => {
    const bodies = ['<p>Hello <b>Ada</b></p>', '<p>Hello <b>Bob</b></p>', '<p>Hello <b>Ada</b></p>', '<p>Hello <b>Ada</b></p>', `<p>${'Long line of news. '.repeat(20)}<a href="https://acme.dev/x">more</a></p>`, '<p>Hello <b>Bob</b></p>'];
    const texts = bodies.map((html) => plainText(html));
    expect(texts).toEqual(['Hello Ada', 'Hello Bob', 'Hello Ada', 'Hello Ada', expect.stringMatching(/^Long line of news\. .*\nLong line.*\nmore \[https:\/\/acme\.dev\/x\]$/s), 'Hello Bob']);
  });

  it('reads a table a row to a line, its cells apart, and keeps the blocks of a layout table\'s cells', () => {
    const receipt = '<table><tr><th>Item</th><th>Qty</th><th>Price</th></tr><tr><td>Widget</td><td>2</td><td>$10.00</td></tr><tr><td><b>Total</b></td><td></td><td>$20.00</td></tr></table>';
    expect(plainText(receipt)).toBe('Item Qty Price\nWidget 2 $10.00\nTotal $20.00');
    const layout = '<table width="100%"><tr><td><table><tr><td><h2>News</h2><p>Some text.</p></td><td><p>Side note.</p></td></tr></table></td></tr><tr><td><p>Footer</p></td></tr></table>';
    expect(plainText(layout)).toBe('News\n\nSome text.\n\nSide note.\n\nFooter');
  });

  it('keeps a heading\'s case, and the case of what was put in it', () => {
    expect(plainText('<h1>Hello Tom &amp; "Jerry"</h1><p>Hi</p>')).toBe('Hello Tom & "Jerry"\n\nHi');
  });
});
