// Values the server keeps for itself, by name, such as a generated signing secret.
import type { Kysely } from 'kysely';
import type { Tables } from './database.ts';

export class SettingStore {
  constructor(private readonly db: Kysely<Tables>) {}

  /** The value kept under `name`, storing `value` first if there was none; the first value written wins. */
  async keep(name: string, value: string): Promise<string> {
    await this.db.insertInto('settings').values({ name, value }).onConflict((oc) => oc.column('name').doNothing()).execute();
    const row = await this.db.selectFrom('settings').select('value').where('name', '=', name).executeTakeFirstOrThrow();
    return row.value;
  }
}
