// The pool's PostgreSQL client: a statement seen again is prepared on the connection and reused, and
// one whose prepared plan went stale (its table changed under it) goes unnamed from then on.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pooledClient } from '../../server/store/postgresClient.ts';
import { backends, postgresSchema } from '../support/backends.ts';

describe.runIf(backends.includes('postgres'))('the PostgreSQL client', () => {
  let schema: Awaited<ReturnType<typeof postgresSchema>>;
  let pool: pg.Pool;
  /** Queried as kysely queries: (text, values), answered by a promise. */
  let client: pg.PoolClient;

  beforeAll(async () => {
    schema = await postgresSchema();
    // One connection, so that every query below runs on the connection whose statements are read.
    pool = new pg.Pool({ connectionString: schema.url, max: 1, Client: pooledClient(pg.Client) });
    await pool.query('create table notes (id int primary key, body text)');
    await pool.query('insert into notes values (1, $1)', ['first']);
    client = await pool.connect();
  });

  afterAll(async () => {
    client.release();
    await pool.end();
    await schema.drop();
  });

  const prepared = async () => (await client.query<{ statement: string }>("select statement from pg_prepared_statements where name like 'mailroom\\_%'")).rows.map((row) => row.statement);

  it('prepares a statement the second time it runs, and answers the same from the prepared one', async () => {
    const lookup = 'select id, body from notes where id = $1';
    expect((await client.query(lookup, [1])).rows).toEqual([{ id: 1, body: 'first' }]);
    expect(await prepared()).not.toContain(lookup);
    expect((await client.query(lookup, [1])).rows).toEqual([{ id: 1, body: 'first' }]);
    expect(await prepared()).toContain(lookup);
    expect((await client.query(lookup, [2])).rows).toEqual([]);
  });

  it('sends a statement unnamed once its prepared plan went stale', async () => {
    const all = 'select * from notes where id = $1';
    await client.query(all, [1]);
    await client.query(all, [1]);
    expect(await prepared()).toContain(all);
    // Another process migrates the table; the prepared SELECT * now returns another row type.
    await client.query('alter table notes add column tags text');
    await expect(client.query(all, [1])).rejects.toMatchObject({ code: '0A000' });
    expect((await client.query(all, [1])).rows).toEqual([{ id: 1, body: 'first', tags: null }]);
  });
});
