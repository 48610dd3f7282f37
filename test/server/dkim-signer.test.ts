// The DKIM signing threads: a message comes back signed by the domain's key, as a receiver checks it
// (mailauth, against the key given as its DNS record); a key that cannot be read fails that message
// alone, and the signer goes on signing.
import { generateKeyPairSync } from 'node:crypto';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { afterAll, describe, expect, it } from 'vitest';
import { DkimSigner } from '../../server/delivery/dkimSigner.ts';

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const key = { domainName: 'acme.example.com', keySelector: 'mailroom', privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
const record = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
const message = (n: number) => Buffer.from(`From: a@acme.example.com\r\nTo: b@example.net\r\nSubject: Number ${n}\r\nMessage-ID: <${n}@acme.example.com>\r\n\r\nHello ${n}\r\n`);
/** A resolver that knows one record: the key's, at its selector. */
const resolver = async (name: string, type: string) => {
  if (type === 'TXT' && name === 'mailroom._domainkey.acme.example.com') return [[record]];
  throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
};

describe('the DKIM signer', () => {
  const signer = new DkimSigner();
  afterAll(() => signer.close());

  it('signs each message, on its threads, so that a receiver finds the signature good', async () => {
    const signed = await Promise.all([1, 2, 3, 4, 5].map((n) => signer.sign(message(n), key)));
    for (const [n, raw] of signed.entries()) {
      expect(raw.toString('latin1')).toMatch(/^DKIM-Signature: /);
      expect(raw.toString('latin1').endsWith(message(n + 1).toString('latin1'))).toBe(true);
      const { results } = await dkimVerify(raw, { resolver });
      expect(results[0]).toMatchObject({ signingDomain: 'acme.example.com', status: { result: 'pass' } });
    }
  });

  it('fails a message whose key cannot be read, and signs the next ones', async () => {
    for (const n of [0, 1]) await expect(signer.sign(message(n), { ...key, privateKey: 'not a key' })).rejects.toThrow(/could not be signed/);
    const raw = await signer.sign(message(9), key);
    expect((await dkimVerify(raw, { resolver })).results[0]).toMatchObject({ status: { result: 'pass' } });
  });
});
