/** The part of a better-sqlite3 connection the cache wraps. */
interface PreparingConnection {
  prepare(sql: string, ...internal: unknown[]): unknown;
}

/** Distinct statements kept per connection: the batched statements come in one shape per batch size. */
const SQLITE_STATEMENT_CACHE_SIZE = 500;

/**
 * Makes `connection.prepare` reuse the statement it compiled for the same SQL (least recently used
 * dropped beyond `limit`). knex's better-sqlite3 dialect prepares every query afresh, and compiling
 * was 8.7% of a projection worker's CPU in a profile at a steady trickle of events, where each
 * transaction carries one or two tasks. A reused statement is safe: knex runs it to completion
 * (`all` or `run`) before the next query, and SQLite recompiles it by itself after a schema change.
 * knex's per-query `safeIntegers` option would stick to a reused statement; this service never sets it.
 */
export function cacheStatements<C extends PreparingConnection>(connection: C, limit = SQLITE_STATEMENT_CACHE_SIZE): C {
  const prepare = connection.prepare.bind(connection);
  const statements = new Map<string, unknown>();
  connection.prepare = (sql: string, ...internal: unknown[]) => {
    // better-sqlite3 itself prepares with extra arguments (pragma, exec helpers): not ours to keep.
    if (internal.length > 0) return prepare(sql, ...internal);
    let statement = statements.get(sql);
    if (statement !== undefined) statements.delete(sql);
    else statement = prepare(sql);
    statements.set(sql, statement);
    if (statements.size > limit) statements.delete(statements.keys().next().value!);
    return statement;
  };
  return connection;
}
