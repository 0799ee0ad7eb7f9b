import type { RepositoryContext } from './context.js';

/**
 * Serialises turn and clarification writes per session (Kandev's `lockSessionTurnWrites`).
 * PostgreSQL takes transaction-scoped advisory locks in sorted order, so two writers that touch the
 * same sessions cannot deadlock; SQLite needs nothing because every write transaction there already
 * holds the database's write lock (`SqlDialect.singleWriter`). Must run inside a
 * transaction.
 */
export async function lockSessionTurnWrites(tx: RepositoryContext, sessionIds: Iterable<string>): Promise<void> {
  if (tx.dialect.singleWriter) return;
  for (const id of [...new Set(sessionIds)].sort()) {
    await tx.knex.raw(`SELECT pg_advisory_xact_lock(hashtextextended('task-session-turn:' || ?, 0))`, [id]);
  }
}

/**
 * Row-locks the sessions so a concurrent move to a terminal state waits for this transaction
 * (claims and restores must not commit against a session that just became terminal). Nothing to
 * lock where write transactions are already serialised.
 */
export async function lockSessionRows(tx: RepositoryContext, sessionIds: Iterable<string>): Promise<void> {
  if (tx.dialect.singleWriter) return;
  const ids = [...new Set(sessionIds)].sort();
  if (ids.length === 0) return;
  await tx.knex.raw(`SELECT id FROM task_sessions WHERE id = ANY(?::text[]) ORDER BY id FOR UPDATE`, [ids]);
}
