// The PostgreSQL connection the pool hands out: pg's Client, with two changes.
//
// An INSERT that comes again is prepared once per connection. pg sends every query for the server to
// parse and plan anew, and a batch's 100-row insert (1,900 values) costs more to parse than to run
// once prepared (docs/performance.md).
// An insert gets a name, from a hash of its text, the second time it is seen; at most MAX_NAMED are
// named. Other statements go unnamed: a prepared SELECT or UPDATE may be given a generic
// plan, which made the outbox claim far slower with a large outbox; planning each with its values
// (plan_cache_mode) took back most of what preparing the insert saved.
//
// A prepared statement that returns rows fails with "cached plan must not change result type" (0A000)
// if its table's columns changed since (another process migrated the database while this one ran):
// that statement then goes unnamed on this connection from the next time on.
//
// pg's query_timeout answers the caller but leaves the connection waiting for a reply that may never
// come, and the pool would hand it out again. Closing it makes the pool replace it.
import { createHash } from 'node:crypto';
import type { Client as PgClient } from 'pg';

const MAX_NAMED = 500;
/** Statement names by text, for the whole process: texts are the same on every connection. */
const names = new Map<string, string>();
const seenOnce = new Set<string>();

function nameOf(text: string): string | undefined {
  if (!text.startsWith('insert into ')) return undefined;
  const known = names.get(text);
  if (known !== undefined || names.size >= MAX_NAMED) return known;
  if (!seenOnce.has(text)) {
    if (seenOnce.size >= 10 * MAX_NAMED) seenOnce.clear();
    seenOnce.add(text);
    return undefined;
  }
  seenOnce.delete(text);
  const name = `mailroom_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
  names.set(text, name);
  return name;
}

export function pooledClient(Client: typeof PgClient): typeof PgClient {
  return class PooledClient extends Client {
    /** Statements this connection must not prepare any more: their prepared plan went stale. */
    private readonly stale = new Set<string>();

    override query(...args: unknown[]): any {
      // kysely's calls are (text, values), answered by a promise; anything else goes as it came.
      const [text, values] = args;
      const name = args.length === 2 && typeof text === 'string' && Array.isArray(values) && !this.stale.has(text) ? nameOf(text) : undefined;
      const result = (super.query as (...a: unknown[]) => unknown)(...(name ? [{ name, text, values }] : args));
      if (result instanceof Promise) {
        result.catch((error: Error & { code?: string }) => {
          if (error.message === 'Query read timeout') (this as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
          if (name && error.code === '0A000') this.stale.add(text as string);
        });
      }
      return result;
    }
  };
}
