// What /metrics reads from the database at scrape time: the outbox by state. The database is the one
// place every delivery worker records its outcomes (a thread beside the server, or `npm run worker`
// processes), so these figures are right whichever process is scraped, and survive restarts.
import { sql, type Kysely } from 'kysely';
import type { EmailEvent, Tables } from './database.ts';

export interface OutboxState {
  state: EmailEvent;
  /** Emails whose last event is this one. */
  emails: number;
  /** Delivery tries made for them, failed ones included. */
  attempts: number;
}

export class MetricsStore {
  constructor(private readonly db: Kysely<Tables>) {}

  /** One grouped count over the emails table; states with no emails are absent. */
  async outbox(): Promise<OutboxState[]> {
    const rows = await this.db
      .selectFrom('emails')
      .select(['last_event as state', sql<number>`count(*)`.as('emails'), sql<number>`coalesce(sum(attempts), 0)`.as('attempts')])
      .groupBy('last_event')
      .execute();
    // PostgreSQL returns count and sum as strings (bigint, numeric).
    return rows.map((row) => ({ state: row.state, emails: Number(row.emails), attempts: Number(row.attempts) }));
  }
}
