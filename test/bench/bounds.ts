// The store's share of each request in the rates section: the store call its handler makes (a
// broadcast by id, a page of 100 contacts, 100 emails accepted in one transaction), timed alone in this
// process as CPU time (user and system), which on PostgreSQL leaves out the database server's own.
// Added to the contract target's time per request, it gives the best rate any server built on these
// parts could reach: the contract's checks and the store's work, and nothing else. An optimistic
// bound, since the call runs here without the load generator beside it.
import { composeEmail, memoized, type OutgoingEmail } from '../../server/emails/compose.ts';
import type { EmailRecord } from '../../server/store/emails.ts';
import type { Store } from '../../server/store/index.ts';

export type Endpoint = 'broadcast' | 'contactsPage' | 'batchOf100';

const ROUNDS = 3;
/** How long each round times one call, after a tenth of that as warm-up. */
const ROUND_MS = 1000;

/** Milliseconds of CPU per call, the median of ROUNDS rounds, for each endpoint's store call. */
export async function storeCallCosts(store: Store, broadcastId: string, batch: OutgoingEmail[]): Promise<Record<Endpoint, number>> {
  const findTemplate = memoized((id) => store.templates.find(id));
  const compose = async (): Promise<EmailRecord[]> => {
    const now = new Date();
    return Promise.all(batch.map(async (item) => {
      const record = await composeEmail(item, findTemplate, now);
      if (typeof record === 'string') throw new Error(`the bench's batch is refused: ${record}`);
      return record;
    }));
  };
  return {
    broadcast: await costOf(async () => () => store.broadcasts.find(broadcastId)),
    contactsPage: await costOf(async () => () => store.contacts.page(100, {})),
    // Composing the records is the handler's work, not the store's: done before each call's clock starts.
    batchOf100: await costOf(async () => {
      const records = await compose();
      return () => store.acceptEmails(records);
    }),
  };
}

async function costOf(prepare: () => Promise<() => Promise<unknown>>): Promise<number> {
  const rounds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const warmUpUntil = performance.now() + ROUND_MS / 10;
    while (performance.now() < warmUpUntil) await (await prepare())();
    let cpuMicros = 0;
    let calls = 0;
    const until = performance.now() + ROUND_MS;
    while (performance.now() < until) {
      const call = await prepare();
      const before = process.cpuUsage();
      await call();
      const used = process.cpuUsage(before);
      cpuMicros += used.user + used.system;
      calls++;
    }
    rounds.push(cpuMicros / calls / 1000);
  }
  return rounds.sort((a, b) => a - b)[Math.floor(ROUNDS / 2)]!;
}
