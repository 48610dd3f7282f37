// What a store reports when a change names something that is not there. Thrown inside a transaction,
// they roll it back, so that nothing of the change is kept; server/errors.ts turns them into answers.

/** The thing the request acts on (named by the path) does not exist: a 404, "Segment not found". */
export class NotFound extends Error {
  constructor(readonly what: 'Contact' | 'Segment' | 'Topic' | 'Segment membership') {
    super(`${what} not found`);
  }
}

/** The body names a segment or topic that does not exist: a 422 naming it. */
export class UnknownReference extends Error {
  constructor(
    readonly field: 'segments' | 'topics',
    readonly id: string,
  ) {
    super(`unknown ${field} id ${id}`);
  }
}

/** A segment or topic that a broadcast still to go out (scheduled, being sent, or sent with emails not yet gone out) is addressed to: deleting it would cancel what has not gone out. */
export class InUseByBroadcast extends Error {
  constructor(
    readonly what: 'segment' | 'topic',
    readonly broadcastId: string,
    readonly status: string,
  ) {
    super(`${what} in use by broadcast ${broadcastId}`);
  }
}

/** A contact's new address is another contact's (addresses are one contact's each, in any case): a 422 naming it. */
export class AddressTaken extends Error {
  constructor(readonly email: string) {
    super(`address ${email} is another contact's`);
  }
}
