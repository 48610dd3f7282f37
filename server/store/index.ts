// The store: one object holding the database and a store per resource.
import type { Logger } from 'pino';
import { ApiKeyStore } from './apiKeys.ts';
import { BroadcastStore } from './broadcasts.ts';
import { ContactStore } from './contacts.ts';
import { openDatabase, type Database, type DatabaseOptions } from './database.ts';
import { DomainStore } from './domains.ts';
import { EmailStore, type EmailAttachment, type EmailRecord } from './emails.ts';
import { EventStore } from './events.ts';
import { FanoutStore } from './fanout.ts';
import { claimHolder } from './claimHolder.ts';
import { confirmedTransaction } from './confirmedCommit.ts';
import { IdempotencyStore, type HeldClaim } from './idempotency.ts';
import { MetricsStore } from './metrics.ts';
import { RecipientStore } from './recipients.ts';
import { ReportStore } from './reports.ts';
import { SettingStore } from './settings.ts';
import { SegmentStore } from './segments.ts';
import { TemplateStore } from './templates.ts';
import { SuppressionStore } from './suppressions.ts';
import { TopicStore } from './topics.ts';
import { WebhookDeliveryStore } from './webhookDeliveries.ts';
import { WebhookStore } from './webhooks.ts';

export interface Store {
  database: Database;
  apiKeys: ApiKeyStore;
  contacts: ContactStore;
  segments: SegmentStore;
  topics: TopicStore;
  broadcasts: BroadcastStore;
  templates: TemplateStore;
  /** Sending domains, their DKIM keys and checks. */
  domains: DomainStore;
  emails: EmailStore;
  /** Events, and the webhook deliveries each one owes. */
  events: EventStore;
  /** The broadcast fan-out's claims and chunks. */
  fanout: FanoutStore;
  idempotency: IdempotencyStore;
  /** What GET /metrics reads from the database. */
  metrics: MetricsStore;
  /** A broadcast's recipients at delivery, and their unsubscribe links' changes. */
  recipients: RecipientStore;
  /** Reports about emails that left: DSNs, complaints, refusals of some recipients. */
  reports: ReportStore;
  settings: SettingStore;
  /** Addresses no email is sent to. */
  suppressions: SuppressionStore;
  webhooks: WebhookStore;
  /** The webhook outbox: deliveries claimed, recorded, and webhooks disabled when they keep failing. */
  webhookDeliveries: WebhookDeliveryStore;
  /**
   * Stores accepted emails in the outbox and, when the request carried an idempotency key, its response,
   * in one transaction: the response goes out only after both are committed.
   */
  acceptEmails(records: EmailRecord[], idempotency?: { claim: HeldClaim; status: number; body: unknown }, attachments?: EmailAttachment[]): Promise<void>;
  /** Answers when the database does; used by the health check. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** `logger` hears of connections lost while idle (PostgreSQL); nothing is logged without it. */
export async function openStore(options: DatabaseOptions, logger?: Logger): Promise<Store> {
  const database = await openDatabase(options, logger);
  const events = new EventStore(database.db);
  const emails = new EmailStore(database.db, database.dialect, events);
  const idempotency = new IdempotencyStore(database.db, claimHolder(database.db, database.dialect, options.databaseUrl));
  return {
    database,
    apiKeys: new ApiKeyStore(database.db, database.dialect),
    contacts: new ContactStore(database, events),
    segments: new SegmentStore(database),
    topics: new TopicStore(database),
    broadcasts: new BroadcastStore(database.db, events),
    templates: new TemplateStore(database.db),
    domains: new DomainStore(database.db, database.dialect, events),
    emails,
    events,
    fanout: new FanoutStore(database.db, database.dialect),
    idempotency,
    metrics: new MetricsStore(database.db),
    recipients: new RecipientStore(database.db, events),
    reports: new ReportStore(database.db, database.dialect, events),
    settings: new SettingStore(database.db),
    suppressions: new SuppressionStore(database.db),
    webhooks: new WebhookStore(database.db, database.dialect),
    webhookDeliveries: new WebhookDeliveryStore(database.db, database.dialect),
    acceptEmails: (records, record, attachments) =>
      confirmedTransaction(
        database.db,
        records[0]?.id ?? '',
        async (tx) => {
          // The claim first: if it was lost, nothing is inserted; if held, its row stays locked till commit.
          if (record) await idempotency.complete(tx, record.claim, record.status, record.body);
          await emails.insertMany(tx, records, attachments);
          // A scheduled email's wait is an event (its acceptance, `queued`, is its created_at: no row).
          await events.record(tx, records.flatMap((record) => (record.last_event === 'scheduled' ? [{ type: 'email.scheduled' as const, email_id: record.id, created_at: record.created_at }] : [])));
        },
        async () => records.length > 0 && (await emails.find(records[0]!.id)) !== undefined,
      ),
    ping: async () => {
      await database.db.selectFrom('api_keys').select('id').limit(1).execute();
    },
    close: async () => {
      await idempotency.close();
      await database.close();
    },
  };
}
