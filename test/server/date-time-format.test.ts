// The `date-time` format every check uses answers toISOString's form without ajv-formats' regular
// expressions; it must accept and refuse exactly what ajv-formats' full check does, on any string.
import { fullFormats } from 'ajv-formats/dist/formats.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FORMATS } from '../../server/contract.ts';

const ours = (FORMATS['date-time'] as { validate: (value: string) => boolean }).validate;
const full = (fullFormats['date-time'] as { validate: (value: string) => boolean }).validate;

const twoDigits = fc.integer({ min: 0, max: 99 }).map((n) => String(n).padStart(2, '0'));
/** toISOString's shape with any digits in it: real instants, and impossible days, hours and seconds. */
const canonicalShape = fc
  .tuple(fc.integer({ min: 0, max: 9999 }), twoDigits, twoDigits, twoDigits, twoDigits, twoDigits, fc.integer({ min: 0, max: 999 }))
  .map(([y, mo, d, h, mi, s, ms]) => `${String(y).padStart(4, '0')}-${mo}-${d}T${h}:${mi}:${s}.${String(ms).padStart(3, '0')}Z`);
/** The same, one character replaced: the other forms go to the full check, and must still agree. */
const nearCanonical = fc.tuple(canonicalShape, fc.nat({ max: 23 }), fc.constantFrom('t', ' ', 'z', '+', '-', ':', '.', '0', '9', 'a', 'T', 'Z', '\u0660')).map(([value, at, char]) => value.slice(0, at) + char + value.slice(at + 1));

describe('the date-time format', () => {
  it('agrees with ajv-formats on every canonical-looking string, possible or not', () => {
    fc.assert(fc.property(canonicalShape, (value) => ours(value) === full(value)), { numRuns: 20_000 });
  });

  it('agrees on strings one character away, and on any string', () => {
    fc.assert(fc.property(nearCanonical, (value) => ours(value) === full(value)), { numRuns: 20_000 });
    fc.assert(fc.property(fc.string({ maxLength: 30 }), (value) => ours(value) === full(value)), { numRuns: 5_000 });
  });

  it('reads the calendar and the clock as the full check does', () => {
    const cases: [string, boolean][] = [
      ['2026-11-25T10:00:00.000Z', true],
      ['2024-02-29T00:00:00.000Z', true],
      ['2026-02-29T00:00:00.000Z', false],
      ['2000-02-29T00:00:00.000Z', true],
      ['1900-02-29T00:00:00.000Z', false],
      ['2026-04-31T00:00:00.000Z', false],
      ['2026-13-01T00:00:00.000Z', false],
      ['2026-00-10T00:00:00.000Z', false],
      ['2026-12-31T23:59:60.000Z', true],
      ['2026-12-31T23:58:60.000Z', false],
      ['2026-12-31T24:00:00.000Z', false],
      ['2026-12-31T10:00:00+02:00', true],
      ['2026-12-31T10:00:00', false],
    ];
    for (const [value, valid] of cases) {
      expect(full(value), value).toBe(valid);
      expect(ours(value), value).toBe(valid);
    }
  });
});
