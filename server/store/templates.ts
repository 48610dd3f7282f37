// Templates, found by id or alias.
import type { Kysely, Selectable } from 'kysely';
import type { Tables, TemplateTable } from './database.ts';

export type TemplateRecord = Selectable<TemplateTable>;

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

  /** By id or by alias (an alias may itself look like an id); an id match wins. */
  async find(idOrAlias: string): Promise<TemplateRecord | undefined> {
    const rows = await this.db
      .selectFrom('templates')
      .selectAll()
      .where((eb) => eb.or([eb('id', '=', idOrAlias), eb('alias', '=', idOrAlias)]))
      .execute();
    return rows.find((row) => row.id === idOrAlias) ?? rows[0];
  }

  async publish(id: string, published: string, at: string): Promise<void> {
    await this.db
      .updateTable('templates')
      .set({ status: 'published', published, published_at: at, updated_at: at })
      .where('id', '=', id)
      .execute();
  }
}
