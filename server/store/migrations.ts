// Versioned schema migrations, run at start by every process; kysely's migrator locks so that
// several processes starting together on PostgreSQL apply each migration once.
import { type Kysely, type Migration, Migrator, sql } from 'kysely';
import type { DialectName } from './database.ts';

/** Text columns that are compared or ordered use byte order on PostgreSQL, as SQLite does. */
const bytewise = (dialect: DialectName) => (dialect === 'postgres' ? sql`collate "C"` : sql``);

function migrations(dialect: DialectName): Record<string, Migration> {
  const ordered = bytewise(dialect);
  return {
    '0001_api_keys_contacts_broadcasts': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('api_keys')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('permission', 'text', (c) => c.notNull())
          .addColumn('key_hash', 'text', (c) => c.notNull().unique())
          .addColumn('key_hint', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('revoked_at', 'text')
          .execute();

        await db.schema
          .createTable('contacts')
          .addColumn('id', 'text', (c) => c.primaryKey().modifyEnd(ordered))
          .addColumn('email', 'text', (c) => c.notNull())
          .addColumn('email_key', 'text', (c) => c.notNull().unique())
          .addColumn('first_name', 'text')
          .addColumn('last_name', 'text')
          .addColumn('unsubscribed', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('properties', 'text', (c) => c.notNull().defaultTo('{}'))
          .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .execute();
        // Keyset pagination walks this index in both directions.
        await db.schema.createIndex('contacts_newest_first').on('contacts').columns(['created_at', 'id']).execute();

        await db.schema
          .createTable('broadcasts')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('segment_id', 'text', (c) => c.notNull())
          .addColumn('from_address', 'text', (c) => c.notNull())
          .addColumn('subject', 'text', (c) => c.notNull())
          .addColumn('reply_to', 'text')
          .addColumn('preview_text', 'text')
          .addColumn('html', 'text')
          .addColumn('text', 'text')
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('topic_id', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('scheduled_at', 'text')
          .addColumn('sent_at', 'text')
          .execute();
      },
    },
    '0002_templates_emails_idempotency': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('templates')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('alias', 'text', (c) => c.unique())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('from_address', 'text')
          .addColumn('subject', 'text')
          .addColumn('reply_to', 'text')
          .addColumn('html', 'text', (c) => c.notNull())
          .addColumn('text', 'text')
          .addColumn('variables', 'text', (c) => c.notNull())
          .addColumn('published', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addColumn('published_at', 'text')
          .execute();

        await db.schema
          .createTable('emails')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('from_address', 'text', (c) => c.notNull())
          .addColumn('to_addresses', 'text', (c) => c.notNull())
          .addColumn('cc', 'text')
          .addColumn('bcc', 'text')
          .addColumn('reply_to', 'text')
          .addColumn('subject', 'text', (c) => c.notNull())
          .addColumn('html', 'text')
          .addColumn('text', 'text')
          .addColumn('headers', 'text')
          .addColumn('tags', 'text')
          .addColumn('last_event', 'text', (c) => c.notNull())
          .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('next_attempt_at', 'text', (c) => c.notNull().modifyEnd(ordered))
          .addColumn('message_id', 'text')
          .addColumn('last_error', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .execute();
        // The outbox: what is due, oldest first, and nothing that is already done.
        await db.schema
          .createIndex('emails_due')
          .on('emails')
          .column('next_attempt_at')
          .where(sql.ref('last_event'), 'in', [sql.lit('queued'), sql.lit('delivery_delayed')])
          .execute();

        // What the capture transport keeps of each message: the raw MIME, as a relay would have got it.
        await db.schema
          .createTable('captured_messages')
          .addColumn('email_id', 'text', (c) => c.primaryKey())
          .addColumn('raw', 'text', (c) => c.notNull())
          .addColumn('captured_at', 'text', (c) => c.notNull())
          .execute();

        await db.schema
          .createTable('idempotency_records')
          .addColumn('scope', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('fingerprint', 'text', (c) => c.notNull())
          .addColumn('state', 'text', (c) => c.notNull())
          .addColumn('response_status', 'integer')
          .addColumn('response_body', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('idempotency_records_pk', ['scope', 'key'])
          .execute();
        await db.schema.createIndex('idempotency_records_expiry').on('idempotency_records').column('expires_at').execute();
      },
    },
    '0003_idempotency_holder': {
      // Idempotency keys become scoped to their owner (the API key), and every claim records its holder
      // (a process) so that the claim of a process that died can be taken over at once. PostgreSQL also
      // gets the table rate-limiter-flexible keeps its per-key counters in, so no process creates it.
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema
            .createTable('idempotency_records_0003')
            .addColumn('owner', 'text', (c) => c.notNull())
            .addColumn('scope', 'text', (c) => c.notNull())
            .addColumn('key', 'text', (c) => c.notNull())
            .addColumn('fingerprint', 'text', (c) => c.notNull())
            .addColumn('state', 'text', (c) => c.notNull())
            .addColumn('holder', 'text')
            .addColumn('response_status', 'integer')
            .addColumn('response_body', 'text')
            .addColumn('created_at', 'text', (c) => c.notNull())
            .addColumn('expires_at', 'text', (c) => c.notNull())
            .addPrimaryKeyConstraint('idempotency_records_owner_pk', ['owner', 'scope', 'key'])
            .execute();
          // Completed records had no owner, so any key could replay them: every key keeps that until
          // they expire. In-flight ones are dropped: they never committed, so their retries run afresh.
          await db
            .insertInto('idempotency_records_0003')
            .columns(['owner', 'scope', 'key', 'fingerprint', 'state', 'holder', 'response_status', 'response_body', 'created_at', 'expires_at'])
            .expression(
              db
                .selectFrom('idempotency_records as r')
                .crossJoin('api_keys as k')
                .select(['k.id', 'r.scope', 'r.key', 'r.fingerprint', 'r.state', sql.lit(null).as('holder'), 'r.response_status', 'r.response_body', 'r.created_at', 'r.expires_at'])
                .where('r.state', '=', 'completed'),
            )
            .execute();
          await db.schema.dropTable('idempotency_records').execute();
          await db.schema.alterTable('idempotency_records_0003').renameTo('idempotency_records').execute();
          await db.schema.createIndex('idempotency_records_expiry').on('idempotency_records').column('expires_at').execute();

          if (dialect === 'postgres') {
            // The shape RateLimiterPostgres expects (its _getCreateTableStmt), made here instead of at run time.
            await db.schema
              .createTable('rate_limits')
              .addColumn('key', 'varchar(255)', (c) => c.primaryKey())
              .addColumn('points', 'integer', (c) => c.notNull().defaultTo(0))
              .addColumn('expire', 'bigint')
              .execute();
          }
        });
      },
    },
    '0004_outbox_lease': {
      async up(db: Kysely<any>) {
        // Set by each claim: only the worker holding it may record how the delivery went.
        await db.schema.alterTable('emails').addColumn('lease_token', 'text').execute();
      },
    },
    '0005_emails_by_state': {
      async up(db: Kysely<any>) {
        // /metrics counts emails and their tries by state at every scrape: this index holds all it
        // reads, so the count never reads the emails' bodies (a SQLite scan of them blocks the process).
        await db.schema.createIndex('emails_by_state').on('emails').columns(['last_event', 'attempts']).execute();
      },
    },
    '0006_segments_topics_broadcast_fanout': {
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema
            .createTable('segments')
            .addColumn('id', 'text', (c) => c.primaryKey().modifyEnd(ordered))
            .addColumn('name', 'text', (c) => c.notNull())
            .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .execute();
          await db.schema.createIndex('segments_newest_first').on('segments').columns(['created_at', 'id']).execute();

          // The primary key is the fan-out's walk (one segment, contact by contact); the second index
          // lists a segment's members newest first, as /contacts does; the third a contact's segments.
          await db.schema
            .createTable('segment_contacts')
            .addColumn('segment_id', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('contact_id', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('contact_created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addPrimaryKeyConstraint('segment_contacts_pk', ['segment_id', 'contact_id'])
            .execute();
          await db.schema.createIndex('segment_contacts_newest_first').on('segment_contacts').columns(['segment_id', 'contact_created_at', 'contact_id']).execute();
          await db.schema.createIndex('segment_contacts_by_contact').on('segment_contacts').columns(['contact_id', 'created_at', 'segment_id']).execute();

          await db.schema
            .createTable('topics')
            .addColumn('id', 'text', (c) => c.primaryKey().modifyEnd(ordered))
            .addColumn('name', 'text', (c) => c.notNull())
            .addColumn('description', 'text')
            .addColumn('default_subscription', 'text', (c) => c.notNull())
            .addColumn('visibility', 'text', (c) => c.notNull())
            .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .execute();
          await db.schema.createIndex('topics_newest_first').on('topics').columns(['created_at', 'id']).execute();

          await db.schema
            .createTable('contact_topics')
            .addColumn('contact_id', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('topic_id', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('subscription', 'text', (c) => c.notNull())
            .addColumn('updated_at', 'text', (c) => c.notNull())
            .addPrimaryKeyConstraint('contact_topics_pk', ['contact_id', 'topic_id'])
            .execute();

          await db.schema.createTable('settings').addColumn('name', 'text', (c) => c.primaryKey()).addColumn('value', 'text', (c) => c.notNull()).execute();

          await db.schema.alterTable('broadcasts').addColumn('lease_token', 'text').execute();
          await db.schema.alterTable('broadcasts').addColumn('lease_expires_at', 'text').execute();
          await db.schema.alterTable('broadcasts').addColumn('fanout_after', 'text').execute();
          if (dialect === 'postgres') {
            // Byte order, as SQLite compares, for the keyset walk of the broadcast list.
            await sql`alter table broadcasts alter column id type text collate "C", alter column created_at type text collate "C"`.execute(db);
          }
          await db.schema.createIndex('broadcasts_newest_first').on('broadcasts').columns(['created_at', 'id']).execute();

          // One email per (broadcast, contact): a fan-out that runs again after a crash writes nobody twice.
          await db.schema.alterTable('emails').addColumn('broadcast_id', 'text').execute();
          await db.schema.alterTable('emails').addColumn('contact_id', 'text').execute();
          await db.schema
            .createIndex('emails_broadcast_recipient')
            .unique()
            .on('emails')
            .columns(['broadcast_id', 'contact_id'])
            .where(sql.ref('broadcast_id'), 'is not', null)
            .execute();
        });
      },
    },
    '0007_events_webhooks_suppressions': {
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema
            .createTable('events')
            .addColumn('id', 'text', (c) => c.primaryKey())
            .addColumn('type', 'text', (c) => c.notNull())
            .addColumn('email_id', 'text')
            .addColumn('contact_id', 'text')
            .addColumn('data', 'text')
            .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .execute();
          await db.schema.createIndex('events_by_email').on('events').columns(['email_id', 'created_at']).where(sql.ref('email_id'), 'is not', null).execute();

          await db.schema
            .createTable('webhooks')
            .addColumn('id', 'text', (c) => c.primaryKey().modifyEnd(ordered))
            .addColumn('endpoint', 'text', (c) => c.notNull())
            .addColumn('events', 'text', (c) => c.notNull())
            .addColumn('signing_secret', 'text', (c) => c.notNull())
            .addColumn('status', 'text', (c) => c.notNull())
            .addColumn('status_reason', 'text')
            .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('updated_at', 'text', (c) => c.notNull())
            .execute();
          await db.schema.createIndex('webhooks_newest_first').on('webhooks').columns(['created_at', 'id']).execute();

          await db.schema
            .createTable('webhook_deliveries')
            .addColumn('id', 'text', (c) => c.primaryKey())
            .addColumn('webhook_id', 'text', (c) => c.notNull())
            .addColumn('event_id', 'text', (c) => c.notNull())
            .addColumn('state', 'text', (c) => c.notNull())
            .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
            .addColumn('next_attempt_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('lease_token', 'text')
            .addColumn('last_status', 'integer')
            .addColumn('last_error', 'text')
            .addColumn('created_at', 'text', (c) => c.notNull())
            .addColumn('updated_at', 'text', (c) => c.notNull())
            .execute();
          await db.schema
            .createIndex('webhook_deliveries_due')
            .on('webhook_deliveries')
            .column('next_attempt_at')
            .where(sql.ref('state'), '=', sql.lit('pending'))
            .execute();
          await db.schema.createIndex('webhook_deliveries_by_webhook').on('webhook_deliveries').columns(['webhook_id', 'state']).execute();

          await db.schema
            .createTable('suppressions')
            .addColumn('id', 'text', (c) => c.primaryKey().modifyEnd(ordered))
            .addColumn('email', 'text', (c) => c.notNull())
            .addColumn('email_key', 'text', (c) => c.notNull().unique())
            .addColumn('origin', 'text', (c) => c.notNull())
            .addColumn('source_id', 'text')
            .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .execute();
          await db.schema.createIndex('suppressions_newest_first').on('suppressions').columns(['created_at', 'id']).execute();

          // GET /emails lists newest first by keyset, as every list does.
          if (dialect === 'postgres') {
            await sql`alter table emails alter column id type text collate "C", alter column created_at type text collate "C"`.execute(db);
          }
          await db.schema.createIndex('emails_newest_first').on('emails').columns(['created_at', 'id']).execute();
        });
      },
    },
    '0008_api_key_last_used': {
      async up(db: Kysely<any>) {
        await db.schema.alterTable('api_keys').addColumn('last_used_at', 'text').execute();
      },
    },
    '0009_templates_newest_first': {
      async up(db: Kysely<any>) {
        // GET /templates pages newest first by keyset, as every list does.
        await db.schema.createIndex('templates_newest_first').on('templates').columns(['created_at', 'id']).execute();
      },
    },
    '0010_scheduled_and_deferred_emails': {
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema.alterTable('emails').addColumn('scheduled_at', 'text').execute();
          await db.schema.alterTable('emails').addColumn('deferred_recipients', 'text').execute();
          // A scheduled email waits in the outbox with its time as next_attempt_at, so the outbox's index takes it in.
          await db.schema.dropIndex('emails_due').execute();
          await db.schema
            .createIndex('emails_due')
            .on('emails')
            .column('next_attempt_at')
            .where(sql.ref('last_event'), 'in', [sql.lit('queued'), sql.lit('scheduled'), sql.lit('delivery_delayed')])
            .execute();
        });
      },
    },
    '0011_email_attachments': {
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema.alterTable('emails').addColumn('attachment_count', 'integer', (c) => c.notNull().defaultTo(0)).execute();
          await db.schema
            .createTable('email_attachments')
            .addColumn('id', 'text', (c) => c.notNull())
            .addColumn('email_id', 'text', (c) => c.notNull())
            .addColumn('position', 'integer', (c) => c.notNull())
            .addColumn('filename', 'text')
            .addColumn('content_type', 'text', (c) => c.notNull())
            .addColumn('content_id', 'text')
            .addColumn('size', 'integer', (c) => c.notNull())
            .addColumn('content', 'text', (c) => c.notNull())
            .addPrimaryKeyConstraint('email_attachments_pkey', ['email_id', 'position'])
            .execute();
        });
      },
    },
    '0012_webhook_secret_rotation': {
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema.alterTable('webhooks').addColumn('previous_signing_secret', 'text').execute();
          await db.schema.alterTable('webhooks').addColumn('previous_secret_expires_at', 'text').execute();
        });
      },
    },
    '0013_webhook_events_newest_first': {
      // A webhook's events, newest first (GET /webhooks/{id}/events), a page at a time at any depth.
      async up(db: Kysely<any>) {
        await db.schema.createIndex('webhook_deliveries_newest_first').on('webhook_deliveries').columns(['webhook_id', 'created_at', 'id']).execute();
      },
    },
    '0014_webhook_deliveries_due_by_webhook': {
      // Claims take each webhook's due deliveries apart (server/webhooks/dispatch.ts), so that an
      // endpoint that hangs cannot hold every post slot: the due index leads with the webhook.
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema
            .createIndex('webhook_deliveries_due_by_webhook')
            .on('webhook_deliveries')
            .columns(['webhook_id', 'next_attempt_at'])
            .where(sql.ref('state'), '=', sql.lit('pending'))
            .execute();
          await db.schema.dropIndex('webhook_deliveries_due').execute();
        });
      },
    },
    '0015_domains': {
      // Sending domains, each with its DKIM key; an API key may be held to one of them. Return paths
      // are signed from this migration on: the time is kept, so that a report to an unsigned return
      // path is heeded only for an email sent before (server/inbound/).
      async up(db: Kysely<any>) {
        await inOneTransaction(db, dialect, async (db) => {
          await db.schema
            .createTable('domains')
            .addColumn('id', 'text', (c) => c.primaryKey().modifyEnd(ordered))
            .addColumn('name', 'text', (c) => c.notNull().unique())
            .addColumn('status', 'text', (c) => c.notNull())
            .addColumn('record_status', 'text', (c) => c.notNull())
            .addColumn('region', 'text', (c) => c.notNull())
            .addColumn('return_path', 'text', (c) => c.notNull())
            .addColumn('open_tracking', 'integer', (c) => c.notNull())
            .addColumn('click_tracking', 'integer', (c) => c.notNull())
            .addColumn('tls', 'text', (c) => c.notNull())
            .addColumn('tracking_subdomain', 'text')
            .addColumn('sending', 'text', (c) => c.notNull())
            .addColumn('receiving', 'text', (c) => c.notNull())
            .addColumn('dkim_selector', 'text', (c) => c.notNull())
            .addColumn('dkim_private_key', 'text', (c) => c.notNull())
            .addColumn('dkim_public_key', 'text', (c) => c.notNull())
            .addColumn('dkim_next_selector', 'text')
            .addColumn('dkim_next_private_key', 'text')
            .addColumn('dkim_next_public_key', 'text')
            .addColumn('verified_at', 'text')
            .addColumn('next_check_at', 'text')
            .addColumn('created_at', 'text', (c) => c.notNull().modifyEnd(ordered))
            .addColumn('updated_at', 'text', (c) => c.notNull())
            .execute();
          await db.schema.createIndex('domains_newest_first').on('domains').columns(['created_at', 'id']).execute();
          await db.schema.createIndex('domains_due').on('domains').column('next_check_at').execute();
          await db.schema.alterTable('api_keys').addColumn('domain_id', 'text').execute();
          await db.insertInto('settings').values({ name: 'return_paths_signed_since', value: new Date().toISOString() }).onConflict((oc: any) => oc.column('name').doNothing()).execute();
        });
      },
    },
    '0016_api_keys_newest_first': {
      async up(db: Kysely<any>) {
        // GET /api-keys walks newest first by keyset, as every list does, a chunk at a time when it is whole.
        await db.schema.createIndex('api_keys_newest_first').on('api_keys').columns(['created_at', 'id']).execute();
      },
    },
  };
}

/**
 * kysely runs each PostgreSQL migration in a transaction, but not SQLite's, though SQLite can roll DDL
 * back too: a migration that rebuilds a table must not stop halfway.
 */
function inOneTransaction(db: Kysely<any>, dialect: DialectName, steps: (db: Kysely<any>) => Promise<void>): Promise<void> {
  return dialect === 'sqlite' ? db.transaction().execute(steps) : steps(db);
}

export async function migrate(db: Kysely<any>, dialect: DialectName): Promise<void> {
  // On PostgreSQL the dialect's introspection sees the connection's own schema only (server/store/database.ts).
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations(dialect) } });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`database migration ${failed ? `${failed.migrationName} ` : ''}failed: ${String((error as Error)?.message ?? error)}`, { cause: error });
  }
}
