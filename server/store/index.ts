// The store: one object holding the database and a store per resource.
import { ApiKeyStore } from './apiKeys.ts';
import { BroadcastStore } from './broadcasts.ts';
import { ContactStore } from './contacts.ts';
import { openDatabase, type Database } from './database.ts';

export interface Store {
  database: Database;
  apiKeys: ApiKeyStore;
  contacts: ContactStore;
  broadcasts: BroadcastStore;
  /** Answers when the database does; used by the health check. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export async function openStore(options: { databaseUrl?: string; dataDir: string }): Promise<Store> {
  const database = await openDatabase(options);
  return {
    database,
    apiKeys: new ApiKeyStore(database.db),
    contacts: new ContactStore(database),
    broadcasts: new BroadcastStore(database.db),
    ping: async () => {
      await database.db.selectFrom('api_keys').select('id').limit(1).execute();
    },
    close: () => database.close(),
  };
}
