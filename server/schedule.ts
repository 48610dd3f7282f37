// `scheduled_at`, of a broadcast or of a single email, as Resend takes it: ISO 8601, or English words
// read from now (`in 1 hour`, `tomorrow at 9am`), in UTC. chrono-node reads both; the whole value must
// be the time, so that `send in 1 hour or so` is refused rather than read as a guess. chrono-node is
// loaded on first use: its grammars for every language cost an idle server memory, for a feature
// few use.
import { invalid } from './http/errors.ts';
import { quoted } from './quoted.ts';

/** The latest time a Timestamp can hold (four-digit years). */
const LAST = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An ISO 8601 date and time (`T` or a space between them), with or without seconds, a fraction of any
 * length and an offset. Read here rather than by chrono-node, which takes a fraction's digits as
 * milliseconds (`.5` as 5 ms, sending 495 ms early) and refuses more than three of them (Python's
 * `isoformat()` writes six).
 */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)? ?(?:Z|([+-])(\d{2})(?::?(\d{2}))?)?$/i;

/** The instant an ISO 8601 date and time names; undefined for text of another form, NaN for a time the calendar or clock does not have. */
function dateTime(text: string): number | undefined {
  const parts = DATE_TIME.exec(text);
  if (!parts) return undefined;
  const [year, month, day, hour, minute, second = 0] = parts.slice(1, 7).map((part) => (part === undefined ? undefined : Number(part))) as number[];
  const [fraction = '', sign, offsetHours = '0', offsetMinutes = '0'] = parts.slice(7);
  if (month! < 1 || month! > 12 || hour! > 23 || minute! > 59 || second > 59 || Number(offsetHours) > 23 || Number(offsetMinutes) > 59) return NaN;
  // Milliseconds are what is stored: further digits are dropped.
  const milliseconds = Number(fraction.padEnd(3, '0').slice(0, 3));
  // setUTCFullYear, not Date.UTC, which reads years 0 to 99 as 1900 to 1999.
  const at = new Date(0);
  at.setUTCFullYear(year!, month! - 1, day);
  // A day the calendar does not have (February 30) would roll over into the next month.
  if (at.getUTCDate() !== day) return NaN;
  at.setUTCHours(hour!, minute, second, milliseconds);
  const offset = sign === undefined ? 0 : (sign === '-' ? -1 : 1) * (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000;
  return at.getTime() - offset;
}

/**
 * The time to send at, as stored (ISO 8601 in UTC with milliseconds), or null for now: no time given,
 * or one already past. Throws a 422 naming `scheduled_at` when the value is not a time.
 */
export async function sendTime(scheduledAt: string | undefined, now: Date): Promise<string | null> {
  if (scheduledAt === undefined) return null;
  const text = scheduledAt.trim().replace(/\s+/g, ' ');
  const unreadable = () => invalid(`The \`scheduled_at\` ${quoted(scheduledAt)} cannot be read as a time; give ISO 8601 or words such as \`in 1 hour\`.`, 'invalid_parameter');
  const due = (at: number) => (at <= now.getTime() ? null : new Date(at).toISOString());
  // An ISO 8601 date alone is the day's first instant in UTC, as JavaScript reads it (chrono-node puts
  // a bare date at noon); a day the calendar does not have (February 30) is refused, not rolled over.
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const at = Date.parse(text);
    if (Number.isNaN(at) || !new Date(at).toISOString().startsWith(text)) throw unreadable();
    return due(at);
  }
  const given = dateTime(text);
  if (given !== undefined) {
    if (Number.isNaN(given) || given > LAST) throw unreadable();
    return due(given);
  }
  // Words, or a date in words with a time (`Jan 1 2030 09:00 -05:00`). chrono-node takes any two
  // digits of an offset (+24:00, +00:60), where RFC 3339's run to 23:59; it reads an offset west of
  // UTC written with a colon as UTC, and a fraction's digits as milliseconds. Given without the colon,
  // and as three digits, it reads both right.
  const offset = /\d ?([+-])(\d{2}):?(\d{2})$/.exec(text);
  if (offset && (Number(offset[2]) > 23 || Number(offset[3]) > 59)) throw unreadable();
  const words = text.replace(/(\d:\d{2})[.,](\d+)/, (_, time: string, digits: string) => `${time}.${digits.padEnd(3, '0').slice(0, 3)}`).replace(/([+-]\d{2}):(\d{2})$/, '$1$2');
  const { parse } = await import('chrono-node');
  const [found] = parse(words, { instant: now, timezone: 'UTC' }, { forwardDate: true });
  const at = found?.start.date().getTime();
  if (!found || found.index !== 0 || found.text.length !== words.length || at === undefined || Number.isNaN(at) || at > LAST) throw unreadable();
  return due(at);
}
