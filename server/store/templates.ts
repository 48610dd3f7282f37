// Templates, found by id or alias.
import type { Kysely, Selectable, Updateable } from 'kysely';
import { isUniqueViolation, type Tables, type TemplateTable } from './database.ts';
import { keysetPage, keysetStream, type Cursor, type Order, type Page } from './keyset.ts';
import { UUID_FORM } from './timeOrderedId.ts';

export type TemplateRecord = Selectable<TemplateTable>;
export type TemplateSummaryRecord = Pick<TemplateRecord, 'id' | 'name' | 'alias' | 'status' | 'created_at' | 'updated_at' | 'published_at'>;
export type TemplateChanges = Pick<Updateable<TemplateTable>, 'name' | 'alias' | 'from_address' | 'subject' | 'reply_to' | 'html' | 'text' | 'variables'>;

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

  /** By id (in any case, as ids are stored in lower case) or by alias (which may itself look like an id); an id match wins. */
  async find(idOrAlias: string): Promise<TemplateRecord | undefined> {
    const id = UUID_FORM.test(idOrAlias) ? idOrAlias.toLowerCase() : idOrAlias;
    const rows = await this.db
      .selectFrom('templates')
      .selectAll()
      .where((eb) => eb.or([eb('id', '=', id), eb('alias', '=', idOrAlias)]))
      .execute();
    return rows.find((row) => row.id === id) ?? rows[0];
  }

  /** One page of templates newest first. */
  page(limit: number, cursor: Cursor): Promise<Page<TemplateSummaryRecord>> {
    return keysetPage(this.summaries(), this.order, limit, cursor);
  }

  /** Every template beyond the cursor, newest first, in keyset chunks. */
  stream(cursor: Cursor): AsyncGenerator<TemplateSummaryRecord> {
    return keysetStream(this.summaries(), this.order, cursor, (t) => [t.created_at, t.id]);
  }

  /** The summary's columns only: a template's bodies may be a megabyte each. */
  private summaries() {
    return this.db.selectFrom('templates').select(['id', 'name', 'alias', 'status', 'created_at', 'updated_at', 'published_at']);
  }

  private readonly order: Order = {
    time: 'created_at',
    id: 'id',
    position: (id) => this.db.selectFrom('templates').select(['created_at as time', 'id']).where('id', '=', id).executeTakeFirst(),
  };

  /**
   * Changes the draft content (the published version, which sends use, stays as it was); 'alias_taken'
   * when another template has the new alias. The check and the change are one transaction, and the
   * unique index stands behind both.
   */
  async update(id: string, changes: TemplateChanges, at: string): Promise<'updated' | 'alias_taken'> {
    try {
      return await this.db.transaction().execute(async (tx) => {
        if (changes.alias) {
          const holder = await tx.selectFrom('templates').select('id').where('alias', '=', changes.alias).where('id', '!=', id).executeTakeFirst();
          if (holder) return 'alias_taken';
        }
        await tx.updateTable('templates').set({ ...changes, updated_at: at }).where('id', '=', id).execute();
        return 'updated';
      });
    } catch (error) {
      // Two templates renamed to one alias at once on PostgreSQL: the index refuses the second.
      if (isUniqueViolation(error)) return 'alias_taken';
      throw error;
    }
  }

  /** Deletes the template; emails sent from it keep what they were rendered with. False if there was none. */
  async remove(id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('templates').where('id', '=', id).executeTakeFirst();
    return Number(result.numDeletedRows) === 1;
  }

  async publish(id: string, published: string, at: string): Promise<void> {
    await this.db
      .updateTable('templates')
      .set({ status: 'published', published, published_at: at, updated_at: at })
      .where('id', '=', id)
      .execute();
  }
}
