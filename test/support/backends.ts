// The two stores every server suite runs against. PostgreSQL tests use a schema of their own in the
// `test` database; without a reachable server they skip with a line saying so, except under CI=true,
// where a skipped PostgreSQL suite is a failure.
import pg from 'pg';

export type Backend = 'sqlite' | 'postgres';

export const POSTGRES_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function postgresReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

const reachable = await postgresReachable();
if (!reachable) {
  if (process.env.CI === 'true') throw new Error(`PostgreSQL is not reachable at ${POSTGRES_URL}, and CI=true does not allow skipping its tests`);
  console.warn(`PostgreSQL is not reachable at ${POSTGRES_URL}: skipping the PostgreSQL tests (CI=true makes this a failure)`);
}

/** The backends to run on here: both, or SQLite alone when PostgreSQL cannot be reached outside CI. */
export const backends: Backend[] = reachable ? ['sqlite', 'postgres'] : ['sqlite'];

/** A fresh, empty PostgreSQL schema and a URL whose connections use it; drop() removes it. */
export async function postgresSchema(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `mailroom_test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  await admin.query(`create schema ${name}`);
  await admin.end();
  const url = `${POSTGRES_URL}?options=${encodeURIComponent(`-c search_path=${name}`)}`;
  return {
    url,
    drop: async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`drop schema ${name} cascade`);
      await client.end();
    },
  };
}
