// The dashboard's reply-to field: addresses separated by commas, except a comma inside a quoted name.
import { describe, expect, it } from 'vitest';
import { replyToValue } from '../dashboard/replyTo.ts';

describe("the dashboard's reply-to field", () => {
  it('splits at commas outside quoted names, as the API reads the addresses', () => {
    expect(replyToValue('a@x.com, b@y.com')).toEqual(['a@x.com', 'b@y.com']);
    expect(replyToValue('"Doe, Jane" <jane@example.com>')).toBe('"Doe, Jane" <jane@example.com>');
    expect(replyToValue('"Doe, Jane" <jane@example.com>, "A \\"B, C\\"" <d@e.com>')).toEqual(['"Doe, Jane" <jane@example.com>', '"A \\"B, C\\"" <d@e.com>']);
    expect(replyToValue(' , ')).toBeUndefined();
  });
});
