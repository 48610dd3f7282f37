// Time-ordered (version 7) UUIDs made in this process, strictly increasing: the milliseconds, then a
// 12-bit sequence that starts at random each millisecond and counts up, then 62 random bits. Events
// recorded together share a created_at (an email's `sent` and `delivered`), and their ids keep them in
// the order they were recorded; ids in creation order also append to the primary-key index.
import { randomBytes } from 'node:crypto';

let lastMs = 0;
let sequence = 0;

export function timeOrderedId(now = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    // The lower half only, so that thousands of ids in one millisecond still fit.
    sequence = randomBytes(2).readUInt16BE() & 0x7ff;
  } else if (++sequence > 0xfff) {
    // Used up (or the clock went back): borrow the next millisecond rather than repeat an order.
    lastMs += 1;
    sequence = 0;
  }
  const bytes = randomBytes(16);
  bytes.writeUIntBE(lastMs, 0, 6);
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
