// The database: SQLite (a file under DATA_DIR) unless DATABASE_URL names a PostgreSQL server.
// Both run the same migrations and the same kysely queries.
import { setTimeout as sleep } from 'node:timers/promises';
import { Kysely, PostgresDialect, sql, type DatabaseIntrospector, type Generated, type TableMetadata } from 'kysely';
import { pino, type Logger } from 'pino';
import { migrate } from './migrations.ts';
import { pooledClient } from './postgresClient.ts';
import { reconnectingPool } from './reconnectingPool.ts';
import { openSqlite } from './sqlite.ts';

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
  /** When the key last authenticated a request, to the minute (server/auth.ts writes it at most once a minute). */
  last_used_at: string | null;
  /** The domain a sending key may send from alone; null for any. */
  domain_id: Generated<string | null>;
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
  /** The fan-out's claim: who holds it and until when (see the broadcast worker). */
  lease_token: Generated<string | null>;
  lease_expires_at: Generated<string | null>;
  /** The last contact id (in segment order) whose email the fan-out has written; it resumes after it. */
  fanout_after: Generated<string | null>;
}

export interface SegmentTable {
  id: string;
  name: string;
  created_at: string;
}

/** A contact's membership of a segment. */
export interface SegmentContactTable {
  segment_id: string;
  contact_id: string;
  /** The contact's own created_at, copied (it never changes) so that members list newest first by index. */
  contact_created_at: string;
  /** When the contact joined the segment. */
  created_at: string;
}

export interface TopicTable {
  id: string;
  name: string;
  description: string | null;
  /** What a contact with no subscription row of its own gets. */
  default_subscription: 'opt_in' | 'opt_out';
  visibility: 'public' | 'private';
  created_at: string;
}

/** A contact's own choice for one topic; without a row, the topic's default holds. */
export interface ContactTopicTable {
  contact_id: string;
  topic_id: string;
  subscription: 'opt_in' | 'opt_out';
  updated_at: string;
}

/** Values the server keeps for itself, such as a generated signing secret. */
export interface SettingTable {
  name: string;
  value: string;
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

export type EmailEvent = 'queued' | 'scheduled' | 'sent' | 'delivered' | 'delivery_delayed' | 'bounced' | 'complained' | 'failed' | 'suppressed' | 'canceled';

/** What an event row records, in Resend's names; an email's `last_event` is its newest, without `email.`. */
export type EventType = `email.${Exclude<EmailEvent, 'queued'>}` | 'contact.created' | 'contact.updated' | 'contact.deleted' | 'domain.created' | 'domain.updated' | 'domain.deleted';

export type DomainStatus = 'not_started' | 'pending' | 'verified' | 'failed' | 'temporary_failure';

/** A domain mail is sent from, with its DKIM key (server/domains/). */
export interface DomainTable {
  id: string;
  /** Lower-cased, unique. */
  name: string;
  status: DomainStatus;
  /** JSON: each record's status, by its key (server/domains/records.ts). */
  record_status: string;
  region: string;
  /** The return path's subdomain label (`send` for send.acme.dev). */
  return_path: string;
  open_tracking: number;
  click_tracking: number;
  tls: 'opportunistic' | 'enforced';
  tracking_subdomain: string | null;
  sending: 'enabled' | 'disabled';
  receiving: 'enabled' | 'disabled';
  dkim_selector: string;
  /** PKCS#8 PEM: never answered, logged or counted. */
  dkim_private_key: string;
  /** The public key, base64 DER (SPKI), as the DKIM record's `p=` gives it. */
  dkim_public_key: string;
  /** A key made by a rotation, under a selector of its own: it takes over once its record is found. */
  dkim_next_selector: string | null;
  dkim_next_private_key: string | null;
  dkim_next_public_key: string | null;
  /** When every required record was last found as given; null if never. */
  verified_at: string | null;
  /** When its records are next looked up; null when no check is due (never verified). */
  next_check_at: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * One change in the life of an email or a contact. An email's `queued` is not a row: it is the
 * email's own created_at, so accepting mail writes nothing more than it did.
 */
export interface EventTable {
  id: string;
  type: EventType;
  email_id: string | null;
  contact_id: string | null;
  /** JSON: what the event adds (a bounce's type and diagnostic, a contact as it was); null when nothing. */
  data: string | null;
  created_at: string;
}

export interface WebhookTable {
  id: string;
  endpoint: string;
  /** JSON array of the event types it receives. */
  events: string;
  signing_secret: string;
  /** The secret before the last rotation, which signs deliveries too until `previous_secret_expires_at`. */
  previous_signing_secret: Generated<string | null>;
  previous_secret_expires_at: Generated<string | null>;
  status: 'enabled' | 'disabled';
  /** Why it was disabled, when the server did it (an endpoint that kept failing). */
  status_reason: string | null;
  created_at: string;
  updated_at: string;
}

/** One event owed to one webhook: its own outbox, claimed with leases like the emails'. */
export interface WebhookDeliveryTable {
  /** The `svix-id` header: the same on every attempt, so receivers can drop duplicates. */
  id: string;
  webhook_id: string;
  event_id: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_attempt_at: string;
  lease_token: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface SuppressionTable {
  id: string;
  email: string;
  /** The lower-cased address, unique. */
  email_key: string;
  origin: 'bounce' | 'complaint' | 'manual';
  /** The email whose bounce or complaint put the address here; null when added by hand. */
  source_id: string | null;
  created_at: string;
}

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
  /** The time a single send asked to go out at (`scheduled_at`), or null for at once. */
  scheduled_at: string | null;
  /** When the outbox may next hand it to a worker; a claim moves it forward by the lease. */
  next_attempt_at: string;
  message_id: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  /** Names the claim that holds the email, while one does; set by the outbox, never on insert. */
  lease_token: Generated<string | null>;
  /**
   * JSON array of the recipients a relay deferred (4xx) while it took the message for the others: the
   * next attempt goes to them alone. Null when every recipient is still to be sent to.
   */
  deferred_recipients: Generated<string | null>;
  /** A broadcast's email: its content is the broadcast's, personalized for the contact at delivery. */
  broadcast_id: Generated<string | null>;
  contact_id: Generated<string | null>;
  /** How many rows of email_attachments go with it: the outbox reads them only for an email that has some. */
  attachment_count: Generated<number>;
}

/** A file sent with an email, as given: kept apart from the email's row, which the outbox rewrites with every attempt. */
export interface EmailAttachmentTable {
  id: string;
  email_id: string;
  /** Its place among the email's attachments, from 0. */
  position: number;
  filename: string | null;
  content_type: string;
  content_id: string | null;
  /** The file's size in bytes. */
  size: number;
  /** The file's bytes in base64, as the contract has them checked. */
  content: string;
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
  email_attachments: EmailAttachmentTable;
  captured_messages: CapturedMessageTable;
  idempotency_records: IdempotencyRecordTable;
  segments: SegmentTable;
  segment_contacts: SegmentContactTable;
  topics: TopicTable;
  contact_topics: ContactTopicTable;
  settings: SettingTable;
  events: EventTable;
  webhooks: WebhookTable;
  webhook_deliveries: WebhookDeliveryTable;
  suppressions: SuppressionTable;
  domains: DomainTable;
}

export interface Database {
  db: Kysely<Tables>;
  dialect: DialectName;
  /** PostgreSQL: the connection pool's counts right now, for /metrics; SQLite has no pool. */
  poolUsage?(): PoolUsage;
  /**
   * PostgreSQL: a few connections of their own, whose statements the server ends after
   * `statementTimeoutMs`, for work that must give up quickly without taking the pool's connections
   * (closed with the database). SQLite has no pool.
   */
  quickConnections?(options: { max: number; statementTimeoutMs: number }): Kysely<Tables>;
  close(): Promise<void>;
}

export interface PoolUsage {
  /** Connections open, idle among them, and callers waiting for one; `max` is the pool's size. */
  total: number;
  idle: number;
  waiting: number;
  max: number;
}

/**
 * Whether an error means the database could not be reached or answered in time (so the request changed
 * nothing and may be sent again), rather than that the query was wrong: PostgreSQL's connection,
 * insufficient-resources and operator-intervention classes (08, 53: too many connections, disk full;
 * 57), a database not accepting connections, a socket refused, reset or timed out, a pool that gave
 * no connection in time, a statement past its time limit, or SQLite still locked after its busy timeout.
 */
export function isUnavailable(error: unknown): boolean {
  const { code, message = '' } = (error ?? {}) as { code?: unknown; message?: string };
  // PostgreSQL's classes 08 (connection), 53 (resources), 57 (operator intervention) and 28 (login refused,
  // as while a password is rotated), and 3D000: the database itself is gone (dropped, renamed).
  if (typeof code === 'string' && (/^(08|53|57|28)/.test(code) || ['3D000', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'SQLITE_BUSY'].includes(code))) return true;
  if (noConnectionInTime(error) || /Connection terminated|Query read timeout|Client has encountered a connection error|is not currently accepting connections/.test(message)) return true;
  // An error of the server's own that an outage caused (a commit whose outcome could not be learned).
  const { cause } = (error ?? {}) as { cause?: unknown };
  return cause !== undefined && cause !== error && isUnavailable(cause);
}

/** The pool gave no connection within DATABASE_CONNECT_TIMEOUT_MS: under a burst, with the database up, as often as when it is down. */
export const noConnectionInTime = (error: unknown): boolean => /timeout exceeded when trying to connect/.test((error as { message?: string } | undefined)?.message ?? '');

/**
 * How a failure of work the server takes up again (a worker's round, a key's release) is logged: the
 * database out of reach for a moment (a restart, a connection ended under it) is a warning, anything
 * else an error.
 */
export const failureLevel = (error: unknown): 'warn' | 'error' => (isUnavailable(error) && !isStorageFull(error) ? 'warn' : 'error');

/** Whether a write broke a unique index: PostgreSQL's 23505, SQLite's constraint error. */
export const isUniqueViolation = (error: unknown): boolean => ['23505', 'SQLITE_CONSTRAINT_UNIQUE'].includes((error as { code?: string } | undefined)?.code ?? '');

/** Whether the database refused a write for want of room: SQLite's disk full, PostgreSQL's 53100. */
export const isStorageFull = (error: unknown): boolean => ['SQLITE_FULL', '53100'].includes((error as { code?: string } | undefined)?.code ?? '');

export interface DatabaseOptions {
  databaseUrl?: string;
  dataDir: string;
  /** PostgreSQL: longest wait for a pooled connection (all busy, or the server slow to accept one). */
  databaseConnectTimeoutMs?: number;
  /** PostgreSQL: longest run of one statement, and longest idle spell inside a transaction. */
  databaseStatementTimeoutMs?: number;
}

export async function openDatabase(options: DatabaseOptions, logger: Logger = pino({ level: 'silent' })): Promise<Database> {
  const database = options.databaseUrl ? await openPostgres(options.databaseUrl, options, logger) : await openSqlite(options.dataDir);
  for (let attempt = 1; ; attempt++) {
    try {
      await migrate(database.db, database.dialect);
      return database;
    } catch (error) {
      // A connection ended under the migrations (the database restarting, an administrator ending it):
      // what they did was rolled back with it, so they are run again, as a request would be.
      if (attempt < MIGRATION_ATTEMPTS && isUnavailable(error)) {
        logger.warn({ err: error, attempt }, 'database migration interrupted; running it again');
        await sleep(MIGRATION_RETRY_MS);
        continue;
      }
      await database.close();
      throw error;
    }
  }
}

const MIGRATION_ATTEMPTS = 5;
const MIGRATION_RETRY_MS = 1000;

/**
 * pg, loaded as the store opens PostgreSQL. On Node 20, which has no `navigator`, pg asks whether it
 * runs on Cloudflare Workers by constructing a fetch `Response`, and that loads Node's fetch into every
 * thread that opens a store, memory held in threads that never fetch. A `navigator`
 * present while pg loads (Node 21 and later have one) answers it first; only then, and only once.
 */
export function loadPg(): Promise<typeof import('pg').default> {
  pgLoading ??= (async () => {
    const globals = globalThis as { navigator?: unknown };
    const absent = !('navigator' in globals);
    if (absent) globals.navigator = { userAgent: `Node.js/${process.versions.node}` };
    try {
      return (await import('pg')).default;
    } finally {
      if (absent) delete globals.navigator;
    }
  })();
  return pgLoading;
}
let pgLoading: ReturnType<typeof loadPg> | undefined;

// Each driver is loaded when its database is opened: a process on SQLite never loads pg, nor one on
// PostgreSQL better-sqlite3 (a few MB of memory in every thread that opens a store).
async function openPostgres(connectionString: string, options: DatabaseOptions, logger: Logger): Promise<Database> {
  const pg = await loadPg();
  const openPool = (max: number, connectMs: number, statementMs: number, keepIdle = false) => {
    const pool = new pg.Pool({
      connectionString,
      max,
      // pg closes a connection idle for 10 s unless told not to.
      ...(keepIdle && { idleTimeoutMillis: 0 }),
      Client: pooledClient(pg.Client),
      connectionTimeoutMillis: connectMs,
      // Enforced by the server: a runaway statement, or a transaction whose process stalled, ends there...
      statement_timeout: statementMs,
      idle_in_transaction_session_timeout: statementMs,
      // ...and a server or network that stopped answering at all is given up on here, a little later.
      query_timeout: statementMs && statementMs + 5_000,
      keepAlive: true,
    });
    // A connection that breaks while idle in the pool (the server restarted, or an administrator ended
    // it) is reported here; unheard, it would take the process down. The pool has dropped it already.
    pool.on('error', (err) => logger.warn({ err }, 'an idle database connection was lost; the pool will open another'));
    // One that breaks while checked out fails the query that is using it, or the next one; the pool then
    // drops it. This listener only keeps the event from being an uncaught exception.
    pool.on('connect', (client) => client.on('error', () => {}));
    return pool;
  };
  const pool = openPool(10, options.databaseConnectTimeoutMs ?? 5_000, options.databaseStatementTimeoutMs ?? 30_000);
  const db = new Kysely<Tables>({ dialect: new OwnSchemaPostgresDialect({ pool: reconnectingPool(pool) }) });
  const poolUsage = (): PoolUsage => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: pool.options.max });
  const quick: ReturnType<typeof openPool>[] = [];
  const quickConnections = ({ max, statementTimeoutMs }: { max: number; statementTimeoutMs: number }) => {
    // Opened at once and kept open: a caller that waits this little (the rate limit's counters) would
    // otherwise find none open after a quiet spell, and a burst waiting on new ones ran out of time.
    // (Tried again a second later when they fail: at start, the event loop is busy for longer than
    // they may take to connect.)
    const quickPool = openPool(max, statementTimeoutMs, statementTimeoutMs, true);
    const open = async (tries: number) => {
      const opened = await Promise.allSettled(Array.from({ length: max }, () => quickPool.query('select 1')));
      if (tries > 1 && opened.some((outcome) => outcome.status === 'rejected')) setTimeout(() => !quickPool.ending && void open(tries - 1), 1000).unref();
    };
    void open(5);
    quick.push(quickPool);
    return new Kysely<Tables>({ dialect: new PostgresDialect({ pool: quickPool }) });
  };
  const close = async () => {
    // Their pools, not their Kysely instances: Kysely ends a pool only once it has run a query on it.
    await Promise.all(quick.map((pool) => pool.end()));
    await db.destroy();
  };
  return { db, dialect: 'postgres', poolUsage, quickConnections, close };
}

/**
 * kysely's migrator finds its bookkeeping tables through the dialect's introspection, which on
 * PostgreSQL reads every schema in the database: it takes another schema's tables for this one's, and
 * fails outright when another schema is dropped while it reads (a database shared by several Mailroom
 * schemas, as the tests share one, meets both). Introspection here sees the connection's schema only.
 */
class OwnSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    const getTables = async (): Promise<TableMetadata[]> => {
      const { rows } = await sql<{ name: string; schema: string; type: string }>`
        select table_name as name, table_schema as schema, table_type as type
        from information_schema.tables where table_schema = current_schema()`.execute(db);
      // The migrator needs names only; columns are not read.
      return rows.map((row) => ({ name: row.name, schema: row.schema, isView: row.type === 'VIEW', columns: [] }));
    };
    return {
      getSchemas: async () => (await sql<{ name: string }>`select current_schema() as name`.execute(db)).rows,
      getTables,
      getMetadata: async () => ({ tables: await getTables() }),
    };
  }
}

/**
 * Runs an outbox claim on PostgreSQL in a transaction of its own with bitmap scans and sorts off, so
 * that it reads the oldest due rows in its partial index's order and stops at its limit. A table that
 * has just filled (a burst before autovacuum's next ANALYZE) has no statistics for the new rows: the
 * planner then estimated a handful of due rows, read every one through a bitmap and sorted them all,
 * on every claim, several times slower than reading in index order (docs/performance.md).
 */
export function inIndexOrder<T>(db: Kysely<Tables>, claim: (tx: Kysely<Tables>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (tx) => {
    await sql`select set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)`.execute(tx);
    return claim(tx);
  });
}
