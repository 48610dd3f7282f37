// Ids for events, emails and contacts: version 7 UUIDs that sort in the order they were made.
import { describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../server/store/timeOrderedId.ts';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('time-ordered ids', () => {
  it('are version 7 UUIDs carrying the time they were made', () => {
    // Later than any id made before in this process, which the next id may not sort before.
    const at = Date.now() + 86_400_000;
    const id = timeOrderedId(at);
    expect(id).toMatch(V7);
    expect(parseInt(id.replace('-', '').slice(0, 12), 16)).toBe(at);
  });

  it('keep their order among thousands made in one millisecond, and when the clock goes back', () => {
    const at = Date.parse('2026-11-25T11:00:00.000Z');
    const ids = [...Array.from({ length: 10_000 }, () => timeOrderedId(at)), ...Array.from({ length: 100 }, () => timeOrderedId(at - 5000))];
    for (const id of ids) expect(id).toMatch(V7);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
