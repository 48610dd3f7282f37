// The store: one object holding the database and a store per resource.
import type { Logger } from 'pino';
import { ApiKeyStore } from './apiKeys.ts';
import { BroadcastStore } from './broadcasts.ts';
import { ContactStore } from './contacts.ts';
import { openDatabase, type Database, type DatabaseOptions } from './database.ts';
import { EmailStore, type EmailRecord } from './emails.ts';
import { IdempotencyStore } from './idempotency.ts';
import { TemplateStore } from './templates.ts';

export interface Store {
  database: Database;
  apiKeys: ApiKeyStore;
  contacts: ContactStore;
  broadcasts: BroadcastStore;
  templates: TemplateStore;
  emails: EmailStore;
  idempotency: IdempotencyStore;
  /**
   * Stores accepted emails in the outbox and, when the request carried an idempotency key, its response,
   * in one transaction: the response goes out only after both are committed.
   */
  acceptEmails(records: EmailRecord[], idempotency?: { scope: string; key: string; status: number; body: unknown }): Promise<void>;
  /** Answers when the database does; used by the health check. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** `logger` hears of connections lost while idle (PostgreSQL); nothing is logged without it. */
export async function openStore(options: DatabaseOptions, logger?: Logger): Promise<Store> {
  const database = await openDatabase(options, logger);
  const emails = new EmailStore(database.db, database.dialect);
  const idempotency = new IdempotencyStore(database.db);
  return {
    database,
    apiKeys: new ApiKeyStore(database.db),
    contacts: new ContactStore(database),
    broadcasts: new BroadcastStore(database.db),
    templates: new TemplateStore(database.db),
    emails,
    idempotency,
    acceptEmails: (records, record) =>
      database.db.transaction().execute(async (tx) => {
        await emails.insertMany(tx, records);
        if (record) await idempotency.complete(tx, record.scope, record.key, record.status, record.body);
      }),
    ping: async () => {
      await database.db.selectFrom('api_keys').select('id').limit(1).execute();
    },
    close: () => database.close(),
  };
}
