import { storedNow, beginOrJoin, type RepositoryContext } from '../../src/repository/context.js';
import { lockSessionTurnWrites } from '../../src/repository/sessionLocks.js';

// Turn writes the service itself never makes (Kandev's backend buries orphaned turns on resume):
// the tests make them to check how the current-turn rule reads the rows they leave.

/**
 * Buries an orphaned open turn with zero duration (`completed_at = started_at`) so its dead hours do
 * not count. Such a turn stays conversational: zero duration is never read as "lifecycle".
 */
export function abandonTurn(ctx: RepositoryContext, turnId: string): Promise<boolean> {
  return beginOrJoin(ctx, async (tx) => {
    const turn = await tx.knex('task_session_turns').select('task_session_id').where({ id: turnId }).first();
    if (!turn) return false;
    await lockSessionTurnWrites(tx, [String(turn.task_session_id)]);
    const changed = await tx
      .knex('task_session_turns')
      .where({ id: turnId })
      .whereNull('completed_at')
      .update({ completed_at: tx.knex.ref('started_at'), updated_at: storedNow(tx) });
    return changed > 0;
  });
}

/**
 * Abandons every open turn of a session in one statement under the session lock, so none survives a
 * resume, however many there are. Returns the abandoned turn ids.
 */
export function abandonOpenTurns(ctx: RepositoryContext, sessionId: string): Promise<string[]> {
  return beginOrJoin(ctx, async (tx) => {
    await lockSessionTurnWrites(tx, [sessionId]);
    const open = await tx.knex('task_session_turns').select('id').where({ task_session_id: sessionId }).whereNull('completed_at');
    if (open.length === 0) return [];
    await tx
      .knex('task_session_turns')
      .where({ task_session_id: sessionId })
      .whereNull('completed_at')
      .update({ completed_at: tx.knex.ref('started_at'), updated_at: storedNow(tx) });
    return open.map((r) => String(r.id));
  });
}
