// Keyset paging, newest first, for every list: rows ordered by a (time, id) pair of columns that an
// index covers, a cursor being the id of a row whose place in that order is looked up first. One walk
// for contacts, segments, topics and memberships alike, so that has_more and cursors mean the same
// everywhere.
import type { SelectQueryBuilder } from 'kysely';

export type Cursor = { after: string } | { before: string } | Record<string, never>;
export type Page<Row> = { records: Row[]; hasMore: boolean };

/** An `after` or `before` id that names no item of the list. */
export class UnknownCursor extends Error {
  constructor(readonly parameter: 'after' | 'before') {
    super(`unknown ${parameter} cursor`);
  }
}

/** Any select whose rows are the list's items; the key columns need not be among what it selects. */
type Listing<Row> = SelectQueryBuilder<any, any, Row>;

/**
 * The list's order: its two key columns as the query names them (`created_at`, or `sc.created_at` in
 * a join), and where the row a cursor names sits in that order, or undefined when it is not listed.
 */
export interface Order {
  time: string;
  id: string;
  position(id: string): Promise<{ time: string; id: string } | undefined>;
}

/** One page of at most `limit` rows, newest first, with `hasMore` exact in the direction of travel. */
export async function keysetPage<Row>(query: Listing<Row>, order: Order, limit: number, cursor: Cursor): Promise<Page<Row>> {
  const beyond = await beyondCursor(query, order, cursor);
  if ('before' in cursor) {
    // Walk towards newer rows, then turn the page around to keep newest first.
    const rows = await beyond.orderBy(order.time, 'asc').orderBy(order.id, 'asc').limit(limit + 1).execute();
    return { records: rows.slice(0, limit).reverse(), hasMore: rows.length > limit };
  }
  const rows = await beyond.orderBy(order.time, 'desc').orderBy(order.id, 'desc').limit(limit + 1).execute();
  return { records: rows.slice(0, limit), hasMore: rows.length > limit };
}

/** Rows a streamed list reads at a time: on SQLite each read runs to its end without letting other requests in. */
export const STREAM_CHUNK = 100;

/**
 * Every row beyond the cursor, newest first, read in keyset chunks of `chunk` rows: one short query per
 * chunk, so no database connection is held while the caller (a client reading a long response) takes
 * its time, and memory holds one chunk at most. `keyOf` gives a row's own (time, id).
 */
export async function* keysetStream<Row>(query: Listing<Row>, order: Order, cursor: Cursor, keyOf: (row: Row) => [string, string], chunk = STREAM_CHUNK): AsyncGenerator<Row> {
  const beyond = await beyondCursor(query, order, cursor);
  let last: [string, string] | undefined;
  for (;;) {
    const from = last;
    const next = from ? beyond.where((eb) => eb(eb.refTuple(order.time, order.id), '<', eb.tuple(from[0], from[1]))) : beyond;
    const rows: (Row | undefined)[] = await next.orderBy(order.time, 'desc').orderBy(order.id, 'desc').limit(chunk).execute();
    if (rows.length === chunk) last = keyOf(rows.at(-1) as Row);
    // Each row is let go as it is handed on: rows held to the end of their chunk live long enough to be
    // moved to V8's old generation, which then grows with the length of the list.
    for (let at = 0; at < rows.length; at++) {
      const row = rows[at] as Row;
      rows[at] = undefined;
      yield row;
    }
    if (rows.length < chunk) return;
  }
}

/** The query restricted to the rows beyond the cursor; throws UnknownCursor if it names no row. */
async function beyondCursor<Row>(query: Listing<Row>, order: Order, cursor: Cursor): Promise<Listing<Row>> {
  const [parameter, id] = 'after' in cursor ? (['after', cursor.after] as const) : 'before' in cursor ? (['before', cursor.before] as const) : [];
  if (!parameter) return query;
  const at = await order.position(id);
  if (!at) throw new UnknownCursor(parameter);
  const direction = parameter === 'after' ? '<' : '>';
  return query.where((eb) => eb(eb.refTuple(order.time, order.id), direction, eb.tuple(at.time, at.id)));
}
