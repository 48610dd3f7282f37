// A claimed row (an email in the outbox, a webhook delivery) is this worker's until its lease ends.
// What the worker reads or records for it is tried again while the database does not answer (a
// restart, a dropped connection) and the lease lasts: giving up at once would leave the row undone
// until the lease ran out, for a blip; past the lease the row comes due again for any worker.

/**
 * Runs `attempt`, and again after 100 ms, 200 ms... up to 2 s apart while it fails; rethrows its error
 * once the next pause would pass `leaseEnds` (an ISO time), or when the worker is stopping.
 */
export async function retryWhileClaimed<T>(leaseEnds: string, attempt: () => Promise<T>, options: { stopping: () => boolean; onRetry: (err: unknown) => void }): Promise<T> {
  const ends = Date.parse(leaseEnds);
  for (let retry = 0; ; retry++) {
    try {
      return await attempt();
    } catch (err) {
      const pause = Math.min(2_000, 100 * 2 ** retry);
      if (options.stopping() || Date.now() + pause >= ends) throw err;
      options.onRetry(err);
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
