// API keys, stored as SHA-256 hashes only.
import type { Kysely, Selectable } from 'kysely';
import type { ApiKeyTable, Tables } from './database.ts';
import { prepared } from './prepared.ts';

export type ApiKeyRecord = Selectable<ApiKeyTable>;

export class ApiKeyStore {
  // Runs on every authenticated request.
  private readonly byHash;

  constructor(private readonly db: Kysely<Tables>) {
    this.byHash = prepared(this.db, (hash) => this.db.selectFrom('api_keys').selectAll().where('key_hash', '=', hash));
  }

  async insert(record: ApiKeyRecord): Promise<void> {
    await this.db.insertInto('api_keys').values(record).execute();
  }

  /** Inserts the key unless one with its hash is stored (by another process, say); false if so. */
  async insertUnlessExists(record: ApiKeyRecord): Promise<boolean> {
    const inserted = await this.db.insertInto('api_keys').values(record).onConflict((oc) => oc.column('key_hash').doNothing()).returning('id').executeTakeFirst();
    return inserted !== undefined;
  }

  async findByHash(keyHash: string): Promise<ApiKeyRecord | undefined> {
    return (await this.byHash(keyHash))[0];
  }

  list(): Promise<ApiKeyRecord[]> {
    return this.db.selectFrom('api_keys').selectAll().orderBy('created_at').orderBy('id').execute();
  }

  async count(): Promise<number> {
    const { n } = await this.db.selectFrom('api_keys').select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    return Number(n);
  }

  /** Revokes the key with this id; returns whether a live key was revoked. */
  async revoke(id: string, at: string): Promise<boolean> {
    const result = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }
}
