// The query every list takes: `limit`, and at most one of the `after` and `before` cursors.
import { invalid } from './errors.ts';
import { UnknownCursor, type Cursor } from '../store/keyset.ts';

export function cursorOf({ after, before }: { after?: string; before?: string }): Cursor {
  if (after && before) throw invalid('Only one of `after` or `before` may be given.');
  return after ? { after } : before ? { before } : {};
}

/** Runs a list's read; a cursor that names no item of the list (`noun` says what the items are) is a 422. */
export async function listing<T>(noun: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof UnknownCursor) throw invalid(`The \`${error.parameter}\` ${noun} does not exist.`);
    throw error;
  }
}
