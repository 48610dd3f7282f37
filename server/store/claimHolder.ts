// Who holds an idempotency claim: this process, under an id that every process sharing the database can
// check for life, so that the claims of a process that died mid-request are taken over at once instead
// of blocking retries.
//
// PostgreSQL: the process holds a session-level advisory lock keyed by its id, on a connection of its
// own (a pooled one would be handed to other work); PostgreSQL drops the lock when that session ends, so
// a holder is alive while its lock shows in pg_locks. If the connection drops, it is made again and the
// lock taken again; meanwhile other processes may take over its claims, which store/idempotency.ts
// makes safe. TCP keepalives let PostgreSQL end the session of a machine that vanished within a minute.
// SQLite (one machine by nature): the id is `pid:random`, alive while that pid is. The same pid with
// another id is an earlier life of this pid (a restarted container's pid 1), so it is dead.
import { randomBytes } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { Client } from 'pg';
import { type DialectName, loadPg, type Tables } from './database.ts';

export interface ClaimHolder {
  /** This process's id, recorded in the claims it takes. */
  id(): Promise<string>;
  isAlive(holder: string): Promise<boolean>;
  close(): Promise<void>;
}

export function claimHolder(db: Kysely<Tables>, dialect: DialectName, databaseUrl: string | undefined): ClaimHolder {
  return dialect === 'postgres' ? new SessionLockHolder(db, databaseUrl!) : new ProcessHolder();
}

/** The holders of the stores open in this process (tests open several). */
const openHere = new Set<string>();

class ProcessHolder implements ClaimHolder {
  private readonly holder = `${process.pid}:${randomBytes(6).toString('hex')}`;

  constructor() {
    openHere.add(this.holder);
  }

  async id(): Promise<string> {
    return this.holder;
  }

  async isAlive(holder: string): Promise<boolean> {
    const pid = Number(holder.split(':')[0]);
    if (!Number.isInteger(pid) || pid <= 0) return false;
    if (pid === process.pid) return openHere.has(holder);
    try {
      process.kill(pid, 0); // signal 0 only asks whether the process exists
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM'; // it exists, under another user
    }
  }

  async close(): Promise<void> {
    openHere.delete(this.holder);
  }
}

const RECONNECT_MS = 1000;

class SessionLockHolder implements ClaimHolder {
  /** A random positive int8, the advisory lock's key; chosen once, kept across reconnections. */
  private key: string | undefined;
  private first: Promise<void> | undefined;
  private session: Client | undefined;
  private closed = false;

  constructor(
    private readonly db: Kysely<Tables>,
    private readonly url: string,
  ) {}

  /** The lock is taken on the first claim, so processes that never claim (workers, `keys`) hold none. */
  async id(): Promise<string> {
    if (this.key === undefined) {
      this.first ??= this.lockNewKey().catch((error) => {
        this.first = undefined;
        throw error;
      });
      await this.first;
    }
    return this.key!;
  }

  async isAlive(holder: string): Promise<boolean> {
    if (holder === this.key) return true;
    if (!/^\d{1,19}$/.test(holder)) return false;
    // A one-int8 advisory lock shows its key's high and low halves as classid and objid, objsubid 1.
    const { rows } = await sql<{ held: number }>`
      select 1 as held from pg_locks
      where locktype = 'advisory' and objsubid = 1 and granted
        and database = (select oid from pg_database where datname = current_database())
        and ((classid::int8 << 32) | objid::int8) = ${holder}::int8`.execute(this.db);
    return rows.length > 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.session?.end().catch(() => {});
  }

  private async lockNewKey(): Promise<void> {
    while (!this.closed) {
      const key = BigInt.asUintN(63, randomBytes(8).readBigUInt64BE()).toString();
      if (await this.lock(key)) {
        this.key = key;
        return;
      }
    }
    throw new Error('the store is closed');
  }

  /** Opens the session and takes the lock on `key`; false if another session holds it. */
  private async lock(key: string): Promise<boolean> {
    const pg = await loadPg();
    const session = new pg.Client({ connectionString: this.url, keepAlive: true, application_name: `mailroom claims ${key}` });
    session.on('error', () => {}); // a dropped session also ends, and 'end' handles it
    try {
      await session.connect();
      await session.query('set tcp_keepalives_idle = 10; set tcp_keepalives_interval = 5; set tcp_keepalives_count = 6');
      const { rows } = await session.query<{ locked: boolean }>('select pg_try_advisory_lock($1::int8) as locked', [key]);
      if (!rows[0]!.locked || this.closed) {
        await session.end();
        return false;
      }
    } catch (error) {
      await session.end().catch(() => {});
      throw error;
    }
    this.session = session;
    session.once('end', () => {
      if (!this.closed) void this.relock(key);
    });
    return true;
  }

  private async relock(key: string): Promise<void> {
    while (!this.closed) {
      await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS).unref());
      if (this.closed) return;
      const locked = await this.lock(key).catch(() => false);
      if (locked) return;
    }
  }
}
