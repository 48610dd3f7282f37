// Group commit of outcomes, for the email outbox (delivery/worker.ts) and the webhook outbox
// (webhooks/dispatch.ts): an outcome is recorded with the others that arrive while it waits, in one
// transaction. One transaction per outcome costs more than the send it records: SQLite commits without
// waiting on I/O, so without a wait a relay's or an endpoint's connections, answering one at a time,
// made nearly every commit hold one or two outcomes.

export interface GroupCommitOptions {
  /** While answers keep coming, a commit waits for this many outcomes, at most `gatherMs`... */
  size: number;
  gatherMs: number;
  /** ...and no longer than this for the next one: a slow peer's answers are committed as they come, so that a crash sends few of them again. */
  nextAnswerMs: number;
}

export class GroupCommit<T extends { id: string }> {
  /** Sends handed to the peer and not yet answered: while there are none, a commit does not wait. */
  private awaitingAnswer = 0;
  private unrecorded: T[] = [];
  private committing: Promise<void> | undefined;
  /** Wakes a gathering commit when an outcome joins the unrecorded. */
  private outcomeArrived: ((arrived: boolean) => void) | undefined;
  private readonly commits = new Map<T, Promise<string[]>>();

  /** `commit` records a group in one transaction and resolves with the ids whose claim still held. */
  constructor(
    private readonly commit: (group: T[]) => Promise<string[]>,
    private readonly options: GroupCommitOptions,
  ) {}

  /** Counts a send as awaiting its answer while `send` runs. */
  async awaiting<R>(send: () => Promise<R>): Promise<R> {
    this.awaitingAnswer++;
    try {
      return await send();
    } finally {
      this.awaitingAnswer--;
    }
  }

  /** Records `outcome` with its group; resolves with whether its claim still held, rejects when the commit failed. */
  async record(outcome: T): Promise<boolean> {
    this.unrecorded.push(outcome);
    this.outcomeArrived?.(true);
    while (!this.commits.has(outcome)) {
      if (this.committing) {
        await this.committing;
        continue;
      }
      this.committing = this.commitGroup().finally(() => {
        this.committing = undefined;
      });
    }
    try {
      return (await this.commits.get(outcome)!).includes(outcome.id);
    } finally {
      this.commits.delete(outcome);
    }
  }

  /**
   * Commits what is unrecorded after one turn of the event loop, and while answers keep coming (each
   * within `nextAnswerMs` of the last) once `size` outcomes or `gatherMs` have gathered. Settles when
   * the commit does, however it went; its members hear how through `commits`.
   */
  private async commitGroup(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    const { size, gatherMs, nextAnswerMs } = this.options;
    const deadline = performance.now() + gatherMs;
    for (let arrived = true; arrived && this.awaitingAnswer > 0 && this.unrecorded.length < size; ) {
      const wait = Math.min(nextAnswerMs, deadline - performance.now());
      if (wait <= 0) break;
      let timer: NodeJS.Timeout | undefined;
      arrived = await new Promise<boolean>((resolve) => {
        this.outcomeArrived = resolve;
        timer = setTimeout(() => resolve(false), wait);
      });
      clearTimeout(timer);
      this.outcomeArrived = undefined;
    }
    const group = this.unrecorded.splice(0);
    const commit = this.commit(group);
    for (const member of group) this.commits.set(member, commit);
    await commit.catch(() => {});
  }
}
