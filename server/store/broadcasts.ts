// Broadcasts.
import type { Insertable, Kysely, Selectable } from 'kysely';
import type { BroadcastTable, Tables } from './database.ts';
import { prepared } from './prepared.ts';

export type BroadcastRecord = Selectable<BroadcastTable>;

export class BroadcastStore {
  private readonly byId;

  constructor(private readonly db: Kysely<Tables>) {
    this.byId = prepared(this.db, (id) => this.db.selectFrom('broadcasts').selectAll().where('id', '=', id));
  }

  async insert(record: Insertable<BroadcastTable>): Promise<void> {
    await this.db.insertInto('broadcasts').values(record).execute();
  }

  async find(id: string): Promise<BroadcastRecord | undefined> {
    return (await this.byId(id))[0];
  }
}
