// SQLite: one file under DATA_DIR in WAL mode, shared by the HTTP thread and the delivery threads (or
// processes); each has one connection, and every transaction takes the write lock when it begins.
import { mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type SqliteDatabase from 'better-sqlite3';
import { CompiledQuery, Kysely, SqliteDialect, type DatabaseConnection, type Driver } from 'kysely';
import type { Database, Tables } from './database.ts';

/** How long a SQLite statement waits for another connection (the delivery thread's) to finish writing. */
const SQLITE_BUSY_TIMEOUT_MS = 5000;

/** The database file in DATA_DIR. */
export const sqliteFileIn = (dataDir: string): string => join(dataDir, 'mailroom.sqlite');

/**
 * Refuses every statement once the database file was deleted or replaced under the running server
 * (`rm`, a backup moved over it): SQLite would go on writing to the file it holds open, which no later
 * start opens, so everything accepted from then on would be lost at the next restart. Looked for once
 * a second, so writes in the second after are still lost; a file put back is used again.
 */
export class StoreFileGone extends Error {
  readonly code = 'SQLITE_FILE_GONE';
  constructor(file: string) {
    super(`the database file ${file} was deleted or replaced while the server ran: nothing more is written to it; restore it, or restart the server to start a new one`);
  }
}

function watchFile(file: string): { gone: () => boolean; stop: () => void } {
  const { dev, ino } = statSync(file);
  let gone = false;
  const timer = setInterval(() => {
    try {
      const now = statSync(file);
      gone = now.dev !== dev || now.ino !== ino;
    } catch {
      gone = true;
    }
  }, 1000);
  timer.unref();
  return { gone: () => gone, stop: () => clearInterval(timer) };
}

/**
 * `mkdir -p` for DATA_DIR, one level at a time. Node's recursive mkdir never returns where the system
 * refuses a directory with ENOENT though its parent exists (`/proc/anything`): it makes the parent
 * and tries again, for ever. Here the second ENOENT is thrown, for the start-up message to name.
 */
export function makeDataDir(dir: string): void {
  try {
    mkdirSync(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(dir).isDirectory()) return;
    if (code !== 'ENOENT' || dirname(dir) === dir) throw error;
    makeDataDir(dirname(dir));
    mkdirSync(dir);
  }
}

export async function openSqlite(dataDir: string): Promise<Database> {
  const { default: SqliteDatabase } = await import('better-sqlite3');
  makeDataDir(dataDir);
  const file = sqliteFileIn(dataDir);
  const sqlite = new SqliteDatabase(file);
  const watched = watchFile(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  // No busy handler: SQLite's sleeps would stop the whole thread; the driver waits instead (below).
  sqlite.pragma('busy_timeout = 0');
  // better-sqlite3 builds SQLite with a 16 MB page cache a connection (SQLite's own default is 2 MB),
  // which a long stream fills. 4 MB holds what requests and the outbox keep reading, and the
  // system's file cache keeps the rest of the file close (docs/performance.md).
  sqlite.pragma('cache_size = -4000');
  const db = new Kysely<Tables>({ dialect: new WriteLockingSqliteDialect(sqlite, () => (watched.gone() ? new StoreFileGone(file) : undefined)) });
  return {
    db,
    dialect: 'sqlite',
    close: () => {
      watched.stop();
      return db.destroy();
    },
  };
}

/**
 * kysely begins SQLite transactions DEFERRED: one that reads and then writes, while another connection
 * to the file writes, fails at once with SQLITE_BUSY (its snapshot is stale; no wait would help).
 * Every transaction here writes, so each takes the write lock when it begins, waiting for its turn,
 * and then cannot be refused halfway.
 *
 * The wait is the driver's rather than SQLite's busy handler: that one sleeps 1, 2, 5, 10... ms in the
 * calling thread, so a delivery worker whose commit met the webhook outbox's stopped sending for as
 * long, and the HTTP thread stopped answering. Here a statement refused for the lock, when it can be
 * run again (outside a transaction, or the BEGIN itself), is retried every millisecond while the
 * thread goes on with its other work, for up to SQLITE_BUSY_TIMEOUT_MS.
 */
class WriteLockingSqliteDialect extends SqliteDialect {
  constructor(
    private readonly sqlite: SqliteDatabase.Database,
    refusal: () => Error | undefined,
  ) {
    super({ database: withStatementCache(sqlite), onCreateConnection: async (connection) => waitForTheLock(connection, sqlite, refusal) });
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    const rollback = driver.rollbackTransaction.bind(driver);
    driver.beginTransaction = async (connection) => {
      await connection.executeQuery(CompiledQuery.raw('begin immediate'));
    };
    // SQLite rolls a transaction back itself on some failures (the disk full, an I/O error): a ROLLBACK
    // then fails with "no transaction is active", and kysely would throw that instead of the cause.
    driver.rollbackTransaction = async (connection) => {
      if (this.sqlite.inTransaction) await rollback(connection);
    };
    return driver;
  }
}

/**
 * Makes the connection's statements refused for the lock wait for it, where running them again is safe;
 * refuses every statement but a ROLLBACK while `refusal` gives a reason (StoreFileGone).
 */
function waitForTheLock(connection: DatabaseConnection, sqlite: SqliteDatabase.Database, refusal: () => Error | undefined): void {
  const execute = connection.executeQuery.bind(connection);
  connection.executeQuery = async <R>(query: CompiledQuery) => {
    const refused = query.sql === 'rollback' ? undefined : refusal();
    if (refused) throw refused;
    let givesUpAt: number | undefined;
    for (;;) {
      try {
        return await execute<R>(query);
      } catch (error) {
        if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || sqlite.inTransaction) throw error;
        givesUpAt ??= Date.now() + SQLITE_BUSY_TIMEOUT_MS;
        if (Date.now() >= givesUpAt) throw error;
        await sleep(1);
      }
    }
  };
}

/**
 * kysely prepares every query anew; the same few statements run on every request, so keep them.
 * Safe because kysely runs one statement at a time on this connection.
 */
function withStatementCache(sqlite: SqliteDatabase.Database): SqliteDatabase.Database {
  const statements = new Map<string, SqliteDatabase.Statement>();
  const prepare = (source: string) => {
    let statement = statements.get(source);
    if (!statement) {
      if (statements.size >= 500) statements.clear();
      statement = rowsBuiltHere(sqlite.prepare(source));
      statements.set(source, statement);
    }
    return statement;
  };
  return new Proxy(sqlite, { get: (target, key) => (key === 'prepare' ? prepare : Reflect.get(target, key, target)) });
}

/**
 * A reading statement whose rows are built here from the arrays better-sqlite3 gives in raw mode.
 * Its own row objects are made one property at a time from C++, which is slower than building them
 * here from the arrays (measured, in memory). Only what kysely's driver calls is kept:
 * `reader`, `all` and `iterate`. Where two columns share a name the last wins, as in better-sqlite3.
 */
function rowsBuiltHere(statement: SqliteDatabase.Statement): SqliteDatabase.Statement {
  if (!statement.reader) return statement;
  const columnNames = () => statement.columns().map((column) => column.name);
  let names = columnNames();
  const raw = statement.raw(true);
  const row = (values: unknown[]) => {
    // SQLite prepares a statement again after a schema change: `select *` may then have more columns.
    if (values.length !== names.length) names = columnNames();
    const built: Record<string, unknown> = {};
    for (let at = 0; at < names.length; at++) built[names[at]!] = values[at];
    return built;
  };
  const rows = {
    reader: true,
    all: (...parameters: unknown[]) => (raw.all(...parameters) as unknown[][]).map(row),
    *iterate(...parameters: unknown[]) {
      for (const values of raw.iterate(...parameters) as IterableIterator<unknown[]>) yield row(values);
    },
  };
  return rows as unknown as SqliteDatabase.Statement;
}
