// Templates, found by id or alias.
import type { Kysely, Selectable } from 'kysely';
import type { Tables, TemplateTable } from './database.ts';

export type TemplateRecord = Selectable<TemplateTable>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export class TemplateStore {
  constructor(private readonly db: Kysely<Tables>) {}

  /** Inserts the template; false when its alias is taken. */
  async insert(record: TemplateRecord): Promise<boolean> {
    const inserted = await this.db
      .insertInto('templates')
      .values(record)
      .onConflict((oc) => oc.column('alias').doNothing())
      .returning('id')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  /** By id when it looks like one, else by alias. */
  find(idOrAlias: string): Promise<TemplateRecord | undefined> {
    const column = UUID.test(idOrAlias) ? 'id' : 'alias';
    return this.db.selectFrom('templates').selectAll().where(column, '=', idOrAlias).executeTakeFirst();
  }

  async publish(id: string, published: string, at: string): Promise<void> {
    await this.db
      .updateTable('templates')
      .set({ status: 'published', published, published_at: at, updated_at: at })
      .where('id', '=', id)
      .execute();
  }
}
