// kysely builds and compiles a query on every call; on the request path that is measurable work for
// queries that never change shape. These are compiled once, and only their one parameter changes.
import type { Compilable, Kysely } from 'kysely';

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
