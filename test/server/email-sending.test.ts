// Sending without HTTP: the service the send operations call, driven directly on a real store, as
// any other door for mail (SMTP submission, say) would drive it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../server/apiKeys/key.ts';
import { loadConfig } from '../../server/config.ts';
import { sendingDomains } from '../../server/domains/index.ts';
import { EmailSending, type Sender } from '../../server/emails/send.ts';
import type { ApiKeyRecord } from '../../server/store/apiKeys.ts';
import { openStore, type Store } from '../../server/store/index.ts';
import { backends, postgresSchema } from '../support/backends.ts';

describe.each(backends)('sending without HTTP on %s', (backend) => {
  let store: Store;
  let sending: EmailSending;
  let apiKey: ApiKeyRecord;
  let cleanUp: () => Promise<void>;
  const email = { from: 'app@acme.dev', to: 'someone@example.com', subject: 'Hello', text: 'Hi there' };

  beforeAll(async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-sending-'));
    const schema = backend === 'postgres' ? await postgresSchema() : undefined;
    const config = { ...loadConfig({}), dataDir, databaseUrl: schema?.url };
    const logger = pino({ level: 'silent' });
    store = await openStore(config, logger);
    sending = new EmailSending(store, sendingDomains(store, config.domains, logger).senders, { ...config.attachmentPaths, maxBytes: 1_000_000, isFilename: () => true }, logger);
    const { key } = await createKey(store, 'a door of its own', 'sending_access');
    apiKey = (await store.apiKeys.findByToken(key))!;
    cleanUp = async () => {
      await store.close();
      await schema?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    };
  });
  afterAll(() => cleanUp());

  it('stores an email in the outbox and answers its id', async () => {
    const { status, body } = await sending.send(email, { apiKey });
    expect(status).toBe(200);
    expect(await store.emails.find(body.id)).toMatchObject({ id: body.id, from_address: 'app@acme.dev', subject: 'Hello', last_event: 'queued' });
  });

  it('under one Idempotency-Key sends once and answers the same again; another email under it is refused 409', async () => {
    const by: Sender = { apiKey, idempotencyKey: 'door/welcome-1' };
    const first = await sending.send(email, by);
    expect(await sending.send(email, by)).toEqual(first);
    await expect(sending.send({ ...email, subject: 'Other' }, by)).rejects.toMatchObject({ statusCode: 409, errorName: 'invalid_idempotent_request' });
    const page = await store.emails.page(100, {}, undefined);
    expect(page.records.filter((record) => record.id === first.body.id)).toHaveLength(1);
  });

  it('gives the key back when an email is refused, so that the same key works once it is fixed', async () => {
    const by: Sender = { apiKey, idempotencyKey: 'door/fixed-later' };
    await expect(sending.send({ ...email, from: 'not an address' }, by)).rejects.toMatchObject({ statusCode: 422 });
    expect((await sending.send(email, by)).status).toBe(200);
  });

  it('sends a permissive batch whose triage set one email aside, naming it by its index', async () => {
    const triaged = { mode: 'permissive' as const, given: [email, {}, email], indices: [0, 2], errors: [{ index: 1, message: 'Missing `from` field.' }] };
    const { body } = await sending.sendBatch([email, email], triaged, { apiKey });
    expect(body).toEqual({ data: [{ id: expect.any(String) }, { id: expect.any(String) }], errors: [{ index: 1, message: 'Missing `from` field.' }] });
  });
});
