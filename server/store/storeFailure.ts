// Why the store that DATA_DIR or DATABASE_URL names could not be opened, in the terms of those
// variables, for the line a process prints when it cannot start (server, worker, keys).
import { accessSync, constants } from 'node:fs';
import { ConfigError, type Config } from '../config.ts';
import { makeDataDir } from './sqlite.ts';

/**
 * Why the store that DATA_DIR or DATABASE_URL names could not be opened, as one line in the terms of
 * those variables (a driver's stack trace does not say which setting to fix). Asked only after opening
 * failed, so that a start that works pays for none of it. Never echoes a password.
 */
export async function storeFailure(config: Pick<Config, 'dataDir' | 'databaseUrl' | 'databaseConnectTimeoutMs'>, error: unknown): Promise<Error> {
  const said = (error as Error)?.message ?? String(error);
  // kysely's migrator fails before naming any migration when it cannot reach the database at all.
  const cause = said.replace(/^database migration\s+failed: /, 'the database could not be prepared: ');
  if (!config.databaseUrl) {
    try {
      makeDataDir(config.dataDir);
      accessSync(config.dataDir, constants.W_OK | constants.X_OK);
    } catch (problem) {
      const code = (problem as NodeJS.ErrnoException).code ?? '';
      const why = DIRECTORY_PROBLEMS[code] ?? (code || (problem as Error).message);
      return new ConfigError(`DATA_DIR ${config.dataDir} is not a directory that can be written: ${why}`);
    }
    return new Error(`the SQLite store in DATA_DIR ${config.dataDir} could not be opened: ${cause}`);
  }
  const where = postgresPlace(config.databaseUrl);
  // The migrator keeps only the message of what failed: one connection of our own says what it was.
  const { loadPg } = await import('./database.ts');
  const pg = await loadPg();
  const probe = new pg.Client({ connectionString: config.databaseUrl, connectionTimeoutMillis: config.databaseConnectTimeoutMs });
  probe.on('error', () => {}); // a connection that breaks after connecting is the original failure's story
  try {
    await probe.connect();
  } catch (problem) {
    const { code, message } = problem as NodeJS.ErrnoException;
    return new Error(`cannot connect to the database at DATABASE_URL (${where}): ${withoutPassword(message || code || String(problem), config.databaseUrl)}`);
  } finally {
    await probe.end().catch(() => {});
  }
  return new Error(`${withoutPassword(cause, config.databaseUrl)} (DATABASE_URL: ${where})`);
}

const DIRECTORY_PROBLEMS: Record<string, string> = {
  EEXIST: 'it is a file',
  ENOTDIR: 'part of its path is a file',
  ENOENT: 'the system does not allow a directory there',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'the file system is read-only',
};

/** Where a PostgreSQL URL leads, password left out: `PostgreSQL database "mail" on db.internal:5432 as mailroom`. */
export function postgresPlace(databaseUrl: string): string {
  const { hostname, port, pathname, username } = new URL(databaseUrl);
  const database = decodeURIComponent(pathname.slice(1)) || decodeURIComponent(username) || 'postgres';
  const user = username ? ` as ${decodeURIComponent(username)}` : '';
  return `PostgreSQL database "${database}" on ${hostname || 'localhost'}:${port || 5432}${user}`;
}

const withoutPassword = (text: string, databaseUrl: string) => {
  const password = decodeURIComponent(new URL(databaseUrl).password);
  return password ? text.replaceAll(password, '***') : text;
};
