// kysely builds and compiles a query on every call; on the request path and the delivery path that is
// measurable work for queries that never change shape. These are compiled once; only their values change.
import type { Compilable, CompiledQuery, Kysely } from 'kysely';

const SLOT = '\u0000parameter';

/**
 * A query compiled once: `build` puts `slot(name)` where each value goes, and each call gives the
 * values by name, and the transaction to run in when there is one.
 */
export function prepared<DB, Row, Name extends string>(
  db: Kysely<DB>,
  build: (slot: (name: Name) => string) => Compilable<Row>,
): (values: Record<Name, unknown>, executor?: Kysely<DB>) => Promise<Row[]> {
  const compiled = build((name) => SLOT + name).compile();
  const names = compiled.parameters.map((parameter) => (typeof parameter === 'string' && parameter.startsWith(SLOT) ? (parameter.slice(SLOT.length) as Name) : undefined));
  if (names.every((name) => name === undefined)) throw new Error('a prepared query takes at least one slot');
  return async (values, executor = db) => {
    const parameters = compiled.parameters.map((parameter, at) => (names[at] === undefined ? parameter : values[names[at]]));
    return (await executor.executeQuery<Row>({ ...compiled, parameters })).rows;
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
