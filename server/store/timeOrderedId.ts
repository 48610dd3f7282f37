// Time-ordered (version 7) UUIDs made in this process, strictly increasing: the milliseconds, then a
// 12-bit sequence that starts at random each millisecond and counts up, then 62 random bits. Events
// recorded together share a created_at (an email's `sent` and `delivered`), and their ids keep them in
// the order they were recorded. Emails and contacts take them too: ids in creation order append to the
// primary-key index, where random ones each land on a page of their own, so a batch's commit writes
// few pages rather than one per email. They are still UUIDs (`format: uuid`).
import { randomUUID } from 'node:crypto';

/** The form of every id here, a UUID, in either letter case. */
export const UUID_FORM = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

let lastMs = 0;
let sequence = 0;

export function timeOrderedId(now = Date.now()): string {
  // The random bits come from a version 4 UUID: node hands those out of a pool it fills in bulk, where
  // asking for a few random bytes is a system call each time (a fifth of a batch's time, measured).
  const random = randomUUID();
  if (now > lastMs) {
    lastMs = now;
    // The lower half only, so that thousands of ids in one millisecond still fit.
    sequence = parseInt(random.slice(15, 18), 16) & 0x7ff;
  } else if (++sequence > 0xfff) {
    // Used up (or the clock went back): borrow the next millisecond rather than repeat an order.
    lastMs += 1;
    sequence = 0;
  }
  const ms = lastMs.toString(16).padStart(12, '0');
  // Its last 64 bits keep their variant (10xx), as version 7 wants; the version becomes 7.
  return `${ms.slice(0, 8)}-${ms.slice(8)}-7${sequence.toString(16).padStart(3, '0')}-${random.slice(19)}`;
}
