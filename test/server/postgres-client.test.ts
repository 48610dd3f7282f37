// The pool's PostgreSQL client: an insert seen again is prepared on the connection and reused, and
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

  it('prepares an insert the second time it runs, and leaves other statements unnamed', async () => {
    const insert = 'insert into notes (id, body) values ($1, $2)';
    const lookup = 'select id, body from notes where id = $1';
    await client.query(insert, [2, 'second']);
    expect(await prepared()).not.toContain(insert);
    await client.query(insert, [3, 'third']);
    expect(await prepared()).toContain(insert);
    await client.query(insert, [4, 'fourth']);
    expect((await client.query(lookup, [4])).rows).toEqual([{ id: 4, body: 'fourth' }]);
    expect((await client.query(lookup, [3])).rows).toEqual([{ id: 3, body: 'third' }]);
    expect(await prepared()).not.toContain(lookup);
  });

  it('sends an insert unnamed once its prepared plan went stale', async () => {
    const insert = 'insert into notes (id, body) values ($1, $2) returning *';
    await client.query(insert, [10, 'a']);
    await client.query(insert, [11, 'b']);
    expect(await prepared()).toContain(insert);
    // Another process migrates the table; the prepared statement's rows now have another type.
    await client.query('alter table notes add column tags text');
    await expect(client.query(insert, [12, 'c'])).rejects.toMatchObject({ code: '0A000' });
    expect((await client.query(insert, [12, 'c'])).rows).toEqual([{ id: 12, body: 'c', tags: null }]);
  });
});
