// kysely builds and compiles a query on every call; on the request path that is measurable work for
// queries that never change shape. These are compiled once, and only their one parameter changes.
import type { Compilable, CompiledQuery, Kysely } from 'kysely';

const SLOT = '\u0000parameter';

/** A query of one parameter, compiled once: `build(slot)` must use `slot` exactly once. */
export function prepared<DB, Row>(db: Kysely<DB>, build: (slot: string) => Compilable<Row>): (value: unknown) => Promise<Row[]> {
  const compiled = build(SLOT).compile();
  const at = compiled.parameters.indexOf(SLOT);
  if (at < 0 || compiled.parameters.lastIndexOf(SLOT) !== at) throw new Error('a prepared query takes its parameter exactly once');
  return async (value) => {
    const parameters = [...compiled.parameters];
    parameters[at] = value;
    return (await db.executeQuery<Row>({ ...compiled, parameters })).rows;
  };
}

/**
 * A multi-row INSERT, compiled once per row count: kysely's building and compiling of 100 rows of ~20
 * values took about a tenth of a batch request. Every row must have the keys of the first, in any order.
 * The SQL is the dialect's: keep one per database.
 */
export function preparedInsert<DB, Table extends keyof DB & string>(table: Table): (db: Kysely<DB>, rows: readonly Record<string, unknown>[]) => Promise<void> {
  const compiledByShape = new Map<string, { sql: CompiledQuery; slots: [row: number, column: string][] }>();
  return async (db, rows) => {
    if (rows.length === 0) return;
    const columns = Object.keys(rows[0]!);
    const shape = `${rows.length}:${columns.join(',')}`;
    let found = compiledByShape.get(shape);
    if (!found) {
      // Each value a marker naming its row and column, so that the compiled parameters can be told apart.
      const marked = rows.map((_, row) => Object.fromEntries(columns.map((column) => [column, `${SLOT}${row}:${column}`])));
      const sql = db.insertInto(table).values(marked as never).compile();
      const slots = sql.parameters.map((marker) => {
        const [row, column] = String(marker).slice(SLOT.length).split(/:(.*)/s);
        return [Number(row), column!] as [number, string];
      });
      if (compiledByShape.size >= 200) compiledByShape.clear();
      compiledByShape.set(shape, (found = { sql, slots }));
    }
    const parameters = found.slots.map(([row, column]) => rows[row]![column]);
    await db.executeQuery({ ...found.sql, parameters });
  };
}
