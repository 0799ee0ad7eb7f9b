import { rawRows, type RepositoryContext } from '../context.js';

/**
 * A session's automatic queue delivery, Kandev's `queue_session_state.auto_run` (1 unless a row
 * says 0): `queue.set_auto_run` pauses and resumes it, the dispatcher reads it in the transaction
 * that reserves the head, so a paused session gets nothing from its queue however many replicas
 * run. Only queue entries wait for it; a direct prompt (a send) is not queued and goes anyway.
 * `queue.drain` delivers the head of a paused queue once, on purpose.
 */

/** True when the session `sessionColumn` names is paused; a database without the table never is. */
export function pausedPredicate(queueState: boolean, sessionColumn: string): string {
  return queueState ? `EXISTS (SELECT 1 FROM queue_session_state p WHERE p.session_id = ${sessionColumn} AND p.auto_run = 0)` : '1 = 0';
}

export async function readAutoRun(ctx: RepositoryContext, queueState: boolean, sessionId: string): Promise<boolean> {
  if (!queueState) return true;
  const rows = await rawRows<{ auto_run: number | string }>(ctx, `SELECT auto_run FROM queue_session_state WHERE session_id = ?`, [sessionId]);
  return rows[0] === undefined || Number(rows[0].auto_run) !== 0;
}

/** Writes the flag inside `tx`; returns whether it changed. */
export async function writeAutoRun(tx: RepositoryContext, sessionId: string, autoRun: boolean): Promise<boolean> {
  const before = await readAutoRun(tx, true, sessionId);
  await rawRows(
    tx,
    `INSERT INTO queue_session_state (session_id, auto_run) VALUES (?, ?) ON CONFLICT (session_id) DO UPDATE SET auto_run = excluded.auto_run`,
    [sessionId, autoRun ? 1 : 0],
  );
  return before !== autoRun;
}
