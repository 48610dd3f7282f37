// Row locks for changes that must not race a delete. On PostgreSQL a row read FOR SHARE cannot be
// deleted until the reading transaction ends, so a membership or topic choice is never written for a
// contact, segment or topic that a concurrent request has just deleted (each delete removes its row
// first, then what refers to it). SQLite needs none: its transactions take the write lock when they
// begin (see database.ts), so they run one at a time.
import type { DialectName } from './database.ts';

export function shared<Query extends { forShare(): Query }>(query: Query, dialect: DialectName): Query {
  return dialect === 'postgres' ? query.forShare() : query;
}
