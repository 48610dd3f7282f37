// A transaction whose connection is lost as it commits: PostgreSQL may have committed it or not, and
// the error alone cannot tell. Answered "nothing was changed", a caller that sends again makes it
// twice. Where the change is rows with ids made here (accepted emails), a look for one of them on
// another connection tells.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely, Transaction } from 'kysely';
import { isUnavailable, type Tables } from './database.ts';

/** Time for a commit that reached the database to finish before it is looked for. */
const SETTLE_MS = 200;

/** Whether the change was committed could not be learned: it may have been. */
export class CommitUnconfirmed extends Error {
  constructor(
    /** An id of what was being committed, for the caller to look for. */
    readonly id: string,
    cause: unknown,
  ) {
    super('the connection was lost as the transaction committed, and the database could not be asked whether it had', { cause });
  }
}

/**
 * Runs `change` in a transaction. When the database goes out of reach once the change is made, as it
 * commits, looks with `committed` whether it was: if so, resolves; if not, the error stands (nothing
 * was changed); if the database cannot be asked, throws CommitUnconfirmed naming `id`.
 */
export async function confirmedTransaction(db: Kysely<Tables>, id: string, change: (tx: Transaction<Tables>) => Promise<void>, committed: () => Promise<boolean>): Promise<void> {
  let committing = false;
  try {
    await db.transaction().execute(async (tx) => {
      await change(tx);
      committing = true;
    });
  } catch (error) {
    if (!committing || !isUnavailable(error)) throw error;
    await sleep(SETTLE_MS);
    const found = await committed().catch(() => {
      throw new CommitUnconfirmed(id, error);
    });
    if (!found) throw error;
  }
}
