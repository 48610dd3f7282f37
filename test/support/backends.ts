// The two stores every server suite runs against. PostgreSQL tests use a schema of their own in the
// `test` database; without a reachable server they skip with a line saying so, except under CI=true,
// where a skipped PostgreSQL suite is a failure. TEST_BACKENDS=sqlite (as `npm run test:fast` sets it)
// chooses SQLite alone, and PostgreSQL is then neither asked nor missed.
import pg from 'pg';

export type Backend = 'sqlite' | 'postgres';

export const POSTGRES_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The backends TEST_BACKENDS names (a comma-separated list), or both when it is unset. */
function chosenBackends(): Backend[] {
  const names = (process.env.TEST_BACKENDS ?? 'sqlite,postgres').split(',').map((name) => name.trim()).filter(Boolean);
  const unknown = names.filter((name) => name !== 'sqlite' && name !== 'postgres');
  if (unknown.length > 0 || names.length === 0) throw new Error(`TEST_BACKENDS=${process.env.TEST_BACKENDS}: name sqlite, postgres or both, separated by a comma`);
  return [...new Set(names as Backend[])];
}

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

const chosen = chosenBackends();
const reachable = chosen.includes('postgres') && (await postgresReachable());
if (chosen.includes('postgres') && !reachable) {
  if (process.env.CI === 'true') throw new Error(`PostgreSQL is not reachable at ${POSTGRES_URL}, and CI=true does not allow skipping its tests`);
  console.warn(`PostgreSQL is not reachable at ${POSTGRES_URL}: skipping the PostgreSQL tests (CI=true makes this a failure)`);
}

/** The backends to run on here: those chosen, less PostgreSQL when it cannot be reached outside CI. */
export const backends: Backend[] = chosen.filter((backend) => backend !== 'postgres' || reachable);

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
