// Broadcasts.
import type { Kysely, Selectable } from 'kysely';
import type { BroadcastTable, Tables } from './database.ts';

export type BroadcastRecord = Selectable<BroadcastTable>;

export class BroadcastStore {
  constructor(private readonly db: Kysely<Tables>) {}

  async insert(record: BroadcastRecord): Promise<void> {
    await this.db.insertInto('broadcasts').values(record).execute();
  }

  find(id: string): Promise<BroadcastRecord | undefined> {
    return this.db.selectFrom('broadcasts').selectAll().where('id', '=', id).executeTakeFirst();
  }
}
