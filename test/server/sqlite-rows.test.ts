// Rows read from SQLite are built from better-sqlite3's raw arrays (server/store/sqlite.ts): they must
// be the objects better-sqlite3 itself would give, for a cached statement after a schema change too.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../server/store/index.ts';

describe('rows read from SQLite', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-rows-'));
  let store: Store;
  beforeAll(async () => {
    store = await openStore({ dataDir });
  });
  afterAll(async () => {
    await store?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('are objects keyed by column name, the last of two alike winning, streamed as read', async () => {
    const db = store.database.db;
    await sql`create table shelf (id integer primary key, title text, pages integer)`.execute(db);
    await sql`insert into shelf (title, pages) values ('Dune', 412), ('Emma', null)`.execute(db);
    const everything = sql<{ id: number; title: string; pages: number | null }>`select * from shelf order by id`;
    expect((await everything.execute(db)).rows).toEqual([{ id: 1, title: 'Dune', pages: 412 }, { id: 2, title: 'Emma', pages: null }]);
    expect((await sql`select 1 as twice, 2 as twice`.execute(db)).rows).toEqual([{ twice: 2 }]);
    const streamed = [];
    for await (const row of db.selectFrom('shelf' as never).select(['title' as never]).stream()) streamed.push(row);
    expect(streamed).toEqual([{ title: 'Dune' }, { title: 'Emma' }]);

    // The same statement, kept, after a column is added: SQLite prepares it again with one more column.
    await sql`alter table shelf add column author text`.execute(db);
    await sql`update shelf set author = 'Herbert' where id = 1`.execute(db);
    expect((await everything.execute(db)).rows[0]).toEqual({ id: 1, title: 'Dune', pages: 412, author: 'Herbert' });
  });

  it('count the rows a write changed', async () => {
    const result = await store.database.db.updateTable('shelf' as never).set({ pages: 500 } as never).executeTakeFirst();
    expect(result.numUpdatedRows).toBe(2n);
  });
});
