// API keys, stored as SHA-256 hashes only.
import type { Kysely, Selectable } from 'kysely';
import type { ApiKeyTable, DialectName, Tables } from './database.ts';
import { keysetAll, keysetPage, type Cursor, type Order, type Page } from './keyset.ts';
import { prepared } from './prepared.ts';

export type ApiKeyRecord = Selectable<ApiKeyTable>;

export class ApiKeyStore {
  // Runs on every authenticated request.
  private readonly byHash;

  constructor(
    private readonly db: Kysely<Tables>,
    private readonly dialect: DialectName,
  ) {
    this.byHash = prepared(this.db, (slot) => this.db.selectFrom('api_keys').selectAll().where('key_hash', '=', slot('hash')));
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
    return (await this.byHash({ hash: keyHash }))[0];
  }

  /** Every key, revoked ones too, oldest first: what `npm run keys list` shows. */
  list(): Promise<ApiKeyRecord[]> {
    return this.db.selectFrom('api_keys').selectAll().orderBy('created_at').orderBy('id').execute();
  }

  /** The keys not revoked, newest first: one page, or (without `limit`) all of them beyond the cursor. */
  async listLive(limit: number | undefined, cursor: Cursor): Promise<Page<ApiKeyRecord>> {
    const query = this.db.selectFrom('api_keys').selectAll().where('revoked_at', 'is', null);
    if (limit !== undefined) return keysetPage(query, this.order, limit, cursor);
    return { records: await keysetAll(query, this.order, cursor, (k) => [k.created_at, k.id]), hasMore: false };
  }

  private readonly order: Order = {
    time: 'created_at',
    id: 'id',
    position: (id) => this.db.selectFrom('api_keys').select(['created_at as time', 'id']).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst(),
  };

  /** Renames a key that is not revoked; false if there is none with this id. */
  async rename(id: string, name: string): Promise<boolean> {
    const result = await this.db.updateTable('api_keys').set({ name }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Notes that the key was used at `minute`, unless a later use is noted already. */
  async touch(id: string, minute: string): Promise<void> {
    await this.db
      .updateTable('api_keys')
      .set({ last_used_at: minute })
      .where('id', '=', id)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', minute)]))
      .execute();
  }

  /**
   * Revokes a live key unless it is the last live full access key, which would leave nobody able to
   * manage the server. One transaction (the key's row locked on PostgreSQL), so two revocations at once
   * cannot both pass the check.
   */
  async revokeUnlessLast(id: string, at: string): Promise<'revoked' | 'not_found' | 'last_full_access'> {
    return this.db.transaction().execute(async (tx) => {
      const target = await tx.selectFrom('api_keys').select('permission').where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
      if (!target) return 'not_found';
      if (target.permission === 'full_access') {
        // Every live full access key is locked, in one order, so a concurrent revocation waits and then sees this one gone.
        const live = tx.selectFrom('api_keys').select('id').where('revoked_at', 'is', null).where('permission', '=', 'full_access').orderBy('id');
        const keys = await (this.dialect === 'postgres' ? live.forUpdate() : live).execute();
        if (!keys.some((key) => key.id !== id)) return 'last_full_access';
      }
      await tx.updateTable('api_keys').set({ revoked_at: at }).where('id', '=', id).where('revoked_at', 'is', null).execute();
      return 'revoked';
    });
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
