// API keys, stored as SHA-256 hashes only; the tokens of keys read in the last second are kept in memory.
import type { Kysely, Selectable } from 'kysely';
import { hashKey } from '../apiKeys/key.ts';
import type { ApiKeyTable, DialectName, Tables } from './database.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';
import { prepared } from './prepared.ts';

export type ApiKeyRecord = Selectable<ApiKeyTable>;

/**
 * How long a key read for a request is trusted without reading it again. Every authenticated request
 * looks its key up; a key changed through this store is forgotten at once, so this only bounds how long
 * a key revoked by another process (`npm run keys`, another server sharing PostgreSQL) still works.
 */
export const KEY_TRUSTED_MS = 1000;
/** Keys read recently; only keys found are kept, so unknown keys sent at random cannot grow it. */
const KEYS_KEPT = 1000;

export class ApiKeyStore {
  // Runs on every authenticated request.
  private readonly byHash;
  private readonly recent = new Map<string, { record: ApiKeyRecord; until: number }>();

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

  /**
   * The key whose token this is, as read within the last KEY_TRUSTED_MS. Kept by token, so that a
   * request whose key was read recently is not hashed again either (a hash a request showed in profiles).
   */
  async findByToken(token: string): Promise<ApiKeyRecord | undefined> {
    const kept = this.recent.get(token);
    if (kept && kept.until > performance.now()) return kept.record;
    const record = (await this.byHash({ hash: hashKey(token) }))[0];
    if (record) {
      if (this.recent.size >= KEYS_KEPT) this.recent.clear();
      this.recent.set(token, { record, until: performance.now() + KEY_TRUSTED_MS });
    } else this.recent.delete(token);
    return record;
  }

  /** Forgets the key read for requests, so that the next request reads what was just written. */
  private forget(id: string): void {
    for (const [token, { record }] of this.recent) if (record.id === id) this.recent.delete(token);
  }

  /** Every key, revoked ones too, oldest first: what `npm run keys list` shows. */
  list(): Promise<ApiKeyRecord[]> {
    return this.db.selectFrom('api_keys').selectAll().orderBy('created_at').orderBy('id').execute();
  }

  /** One page of the keys not revoked, newest first. */
  pageLive(limit: number, cursor: Cursor): Promise<Page<ApiKeyRecord>> {
    return keysetPage(this.live(), this.order, limit, cursor);
  }

  /** Every key not revoked beyond the cursor, newest first, in keyset chunks. */
  streamLive(cursor: Cursor): AsyncGenerator<ApiKeyRecord> {
    return keysetStream(this.live(), this.order, cursor, (k) => [k.created_at, k.id]);
  }

  private live() {
    return this.db.selectFrom('api_keys').selectAll().where('revoked_at', 'is', null);
  }

  private readonly order: Order = {
    time: 'created_at',
    id: 'id',
    position: (id) => this.db.selectFrom('api_keys').select(['created_at as time', 'id']).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst(),
  };

  /** Renames a key that is not revoked; false if there is none with this id. */
  async rename(id: string, name: string): Promise<boolean> {
    const result = await this.db.updateTable('api_keys').set({ name }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
    this.forget(id);
    return Number(result.numUpdatedRows) === 1;
  }

  /** Notes that the key was used at `minute`, unless a later use is noted already. */
  async touch(id: string, minute: string): Promise<void> {
    try {
      await this.db
        .updateTable('api_keys')
        .set({ last_used_at: minute })
        .where('id', '=', id)
        .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', minute)]))
        .execute();
    } finally {
      // Noted in memory even when the write failed (the disk full): tried again when the key is next
      // read from the database, not on every request meanwhile.
      for (const { record } of this.recent.values()) if (record.id === id && (record.last_used_at === null || record.last_used_at < minute)) record.last_used_at = minute;
    }
  }

  /**
   * Revokes a live key unless it is the last live full access key, which would leave nobody able to
   * manage the server. One transaction (the key's row locked on PostgreSQL), so two revocations at once
   * cannot both pass the check.
   */
  async revokeUnlessLast(id: string, at: string): Promise<'revoked' | 'not_found' | 'last_full_access'> {
    const outcome = await this.db.transaction().execute(async (tx) => {
      const target = await tx.selectFrom('api_keys').select('permission').where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
      if (!target) return 'not_found';
      if (target.permission === 'full_access') {
        // Every live full access key is locked, in one order, so a concurrent revocation waits and then sees this one gone.
        const live = tx.selectFrom('api_keys').select('id').where('revoked_at', 'is', null).where('permission', '=', 'full_access').orderBy('id');
        const keys = await (this.dialect === 'postgres' ? live.forUpdate() : live).execute();
        if (!keys.some((key) => key.id !== id)) return 'last_full_access';
      }
      // Revoked meanwhile by a concurrent request (PostgreSQL read it live before that one committed): it revoked it, not this one.
      const revoked = await tx.updateTable('api_keys').set({ revoked_at: at }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
      return Number(revoked.numUpdatedRows) === 1 ? ('revoked' as const) : ('not_found' as const);
    });
    this.forget(id);
    return outcome;
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
    this.forget(id);
    return Number(result.numUpdatedRows) === 1;
  }
}
