// The database: SQLite (a file under DATA_DIR) unless DATABASE_URL names a PostgreSQL server.
// Both run the same migrations and the same kysely queries.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import Cursor from 'pg-cursor';
import { migrate } from './migrations.ts';

export type DialectName = 'sqlite' | 'postgres';

export interface ApiKeyTable {
  id: string;
  name: string;
  permission: 'full_access' | 'sending_access';
  key_hash: string;
  /** The first characters of the key, so that people can tell keys apart in `keys list`. */
  key_hint: string;
  created_at: string;
  revoked_at: string | null;
}

export interface ContactTable {
  id: string;
  email: string;
  /** The lower-cased email, unique: two contacts cannot differ only in case. */
  email_key: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: number;
  /** JSON object of string values. */
  properties: string;
  created_at: string;
  updated_at: string;
}

export interface BroadcastTable {
  id: string;
  name: string;
  segment_id: string;
  from_address: string;
  subject: string;
  /** JSON array of addresses, or null. */
  reply_to: string | null;
  preview_text: string | null;
  html: string | null;
  text: string | null;
  status: 'draft' | 'scheduled' | 'queued' | 'sent' | 'canceled';
  topic_id: string | null;
  created_at: string;
  scheduled_at: string | null;
  sent_at: string | null;
}

export interface TemplateTable {
  id: string;
  alias: string | null;
  name: string;
  status: 'draft' | 'published';
  from_address: string | null;
  subject: string | null;
  /** JSON array of addresses, or null. */
  reply_to: string | null;
  html: string;
  text: string | null;
  /** JSON array of declared variables. */
  variables: string;
  /** JSON of the content as last published: what sends use. */
  published: string | null;
  created_at: string;
  updated_at: string;
  published_at: string | null;
}

export type EmailEvent = 'queued' | 'sent' | 'delivered' | 'delivery_delayed' | 'failed';

export interface EmailTable {
  id: string;
  from_address: string;
  /** JSON arrays of addresses. */
  to_addresses: string;
  cc: string | null;
  bcc: string | null;
  reply_to: string | null;
  subject: string;
  html: string | null;
  /** null until sent means "generate it from html"; "" means send no plain-text part. */
  text: string | null;
  /** JSON object and JSON array, or null. */
  headers: string | null;
  tags: string | null;
  last_event: EmailEvent;
  attempts: number;
  /** When the outbox may next hand it to a worker; a claim moves it forward by the lease. */
  next_attempt_at: string;
  message_id: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface CapturedMessageTable {
  email_id: string;
  raw: string;
  captured_at: string;
}

export interface IdempotencyRecordTable {
  /** The id of the API key that sent it: keys are scoped to their owner. */
  owner: string;
  /** `POST /emails/batch`: the method and path the key belongs to. */
  scope: string;
  key: string;
  fingerprint: string;
  state: 'in_flight' | 'completed';
  /** The process that claimed it (see store/claimHolder.ts); a claim dies with its holder. */
  holder: string | null;
  response_status: number | null;
  response_body: string | null;
  created_at: string;
  expires_at: string;
}

export interface Tables {
  api_keys: ApiKeyTable;
  contacts: ContactTable;
  broadcasts: BroadcastTable;
  templates: TemplateTable;
  emails: EmailTable;
  captured_messages: CapturedMessageTable;
  idempotency_records: IdempotencyRecordTable;
}

export interface Database {
  db: Kysely<Tables>;
  dialect: DialectName;
  /** For SQLite, the file; streams open their own read connection on it. */
  sqliteFile?: string;
  close(): Promise<void>;
}

export async function openDatabase(options: { databaseUrl?: string; dataDir: string }): Promise<Database> {
  const database = options.databaseUrl ? openPostgres(options.databaseUrl) : openSqlite(options.dataDir);
  try {
    await migrate(database.db, database.dialect);
  } catch (error) {
    await database.close();
    throw error;
  }
  return database;
}

function openSqlite(dataDir: string): Database {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'mailroom.sqlite');
  const sqlite = new SqliteDatabase(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('busy_timeout = 5000');
  const db = new Kysely<Tables>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  return { db, dialect: 'sqlite', sqliteFile: file, close: () => db.destroy() };
}

/**
 * kysely prepares every query anew; the same few statements run on every request, so keep them.
 * Safe because kysely runs one statement at a time on this connection and streams use their own.
 */
function withStatementCache(sqlite: SqliteDatabase.Database): SqliteDatabase.Database {
  const statements = new Map<string, SqliteDatabase.Statement>();
  const prepare = (source: string) => {
    let statement = statements.get(source);
    if (!statement) {
      if (statements.size >= 500) statements.clear();
      statement = sqlite.prepare(source);
      statements.set(source, statement);
    }
    return statement;
  };
  return new Proxy(sqlite, { get: (target, key) => (key === 'prepare' ? prepare : Reflect.get(target, key, target)) });
}

function openPostgres(connectionString: string): Database {
  const pool = new pg.Pool({ connectionString, max: 10 });
  const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool, cursor: Cursor }) });
  return { db, dialect: 'postgres', close: () => db.destroy() };
}
