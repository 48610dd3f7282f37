// Waiting in a test on a condition (a row written, a message received, a log line), never on a guess
// of how long it takes: a deadline only ends a wait that would otherwise hang.
/** How long a condition may take before a test gives up on it: far longer than a busy machine needs. */
export const WAIT_MS = 60_000;

/** Waits until `done` holds, checking every `everyMs`; fails with `what` after `ms`. */
export async function until(done: () => boolean | Promise<boolean>, what: string | (() => string | Promise<string>), ms = WAIT_MS, everyMs = 20): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${ms} ms: ${typeof what === 'string' ? what : await what()}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
