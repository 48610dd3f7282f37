// The signed download links of attachments: what one names, until when, and that nothing else passes.
import { describe, expect, it } from 'vitest';
import { AttachmentLinks, DOWNLOAD_LINK_MS } from '../../server/emails/attachmentLinks.ts';

const email = '01a21879-a1f3-7630-8d8e-260d71ffe92f';
const attachment = '01a21879-a46c-7090-83cb-32e5d0a90d0e';
const links = new AttachmentLinks(Buffer.from('a secret'), () => 'https://mail.acme.dev');
const tokenOf = (url: string) => url.slice('https://mail.acme.dev/attachments/'.length);

describe('attachment download links', () => {
  it('name the email and the attachment until an hour has passed', () => {
    const now = new Date('2026-11-26T12:00:00.000Z');
    const link = links.linkTo(email, attachment, now);
    expect(link.url).toMatch(/^https:\/\/mail\.acme\.dev\/attachments\/[A-Za-z0-9_-]{91}$/);
    expect(link.expiresAt.getTime()).toBe(now.getTime() + DOWNLOAD_LINK_MS);
    expect(links.verify(tokenOf(link.url), new Date(now.getTime() + DOWNLOAD_LINK_MS - 1000))).toEqual({ emailId: email, attachmentId: attachment });
    expect(links.verify(tokenOf(link.url), link.expiresAt)).toBeUndefined();
  });

  it('refuse a token changed in any byte, signed with another secret, or spelled another way', () => {
    const now = new Date();
    const token = tokenOf(links.linkTo(email, attachment, now).url);
    const bytes = Buffer.from(token, 'base64url');
    for (let i = 0; i < bytes.length; i++) {
      const changed = Buffer.from(bytes);
      changed[i]! ^= 1;
      expect(links.verify(changed.toString('base64url'), now)).toBeUndefined();
    }
    expect(new AttachmentLinks(Buffer.from('another secret'), () => '').verify(token, now)).toBeUndefined();
    expect(links.verify(`${token}A`, now)).toBeUndefined();
    expect(links.verify(token.slice(0, -1), now)).toBeUndefined();
    expect(links.verify(`${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`, now)).toBeUndefined();
    expect(links.verify('', now)).toBeUndefined();
  });
});
