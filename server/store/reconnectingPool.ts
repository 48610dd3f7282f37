// The pool kysely takes connections from on PostgreSQL: pg's, except that a statement which found its
// connection broken (the server restarted, or an administrator ended the connection while the pool
// held it) is run again on another, twice at most, where running it again cannot do anything twice:
// a BEGIN, a SELECT outside a transaction, or any statement pg never sent (the connection was known
// broken). Without it a request that took such a connection answered 503 though the database was up.
// A statement inside a transaction is not run again: the transaction is lost with its connection, and
// the request fails with it.
import type { PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type { Pool, PoolClient } from 'pg';

const ATTEMPTS = 3;
const BEGINS = /^(begin|start transaction)\b/i;

export function reconnectingPool(pool: Pool): PostgresPool {
  return {
    connect: async () => new ReconnectingClient(pool, await pool.connect()) as unknown as PostgresPoolClient,
    end: () => pool.end(),
  };
}

class ReconnectingClient {
  private inTransaction = false;
  /** Given back, broken, while another could not yet be had: nothing is left to release. */
  private released = false;

  constructor(
    private readonly pool: Pool,
    private client: PoolClient,
  ) {}

  async query(...args: unknown[]): Promise<PostgresQueryResult<unknown>> {
    const [text, values] = args;
    if (typeof text !== 'string' || !Array.isArray(values)) return (this.client.query as (...a: unknown[]) => any)(...args);
    let result;
    for (let attempt = 1; ; attempt++) {
      try {
        result = await this.client.query(text, values);
        break;
      } catch (error) {
        // The pool may hold other connections that broke with this one and that it has not dropped yet.
        if (attempt === ATTEMPTS || !brokenConnection(error) || !this.safeToRepeat(text, error)) throw error;
        // Dropped from the pool, which opens another in its place.
        this.client.release(error as Error);
        this.released = true;
        this.client = await this.pool.connect();
        this.released = false;
      }
    }
    if (BEGINS.test(text)) this.inTransaction = true;
    else if (/^(commit|rollback)\b/i.test(text)) this.inTransaction = false;
    return result as unknown as PostgresQueryResult<unknown>;
  }

  release(): void {
    if (!this.released) this.client.release();
  }

  private safeToRepeat(text: string, error: unknown): boolean {
    if (BEGINS.test(text)) return true;
    return !this.inTransaction && (/^select\b/i.test(text) || unsent(error));
  }
}

/** The connection, not the statement, failed: ended by the server (57P01–57P03), lost (08), or closed under pg. */
function brokenConnection(error: unknown): boolean {
  const { code, message = '' } = (error ?? {}) as { code?: unknown; message?: string };
  if (typeof code === 'string' && (/^(08|57P0[123])/.test(code) || code === 'ECONNRESET' || code === 'EPIPE')) return true;
  return /Connection terminated|not queryable/.test(message);
}

/** pg refused to send the statement at all: the connection was already known broken. */
const unsent = (error: unknown) => /not queryable/.test(String((error as Error)?.message));
