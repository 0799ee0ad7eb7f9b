import { beginOrNest, rawRows, type RepositoryContext } from '../context.js';
import { unavailable, type Unavailable } from '../planComments/planCommentOutcomes.js';
import type { PlanCommentSchema, ReceiptTable } from '../schema/planCommentTables.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import type { SqlDialect } from '../dialect.js';
import { TERMINAL_SESSION_STATES } from '../../turns/sessionStates.js';
import { primaryGuardBroken } from './primaryGuard.js';
import { waitingReceiptPredicate } from './queuedPrompts.js';
import { lockQueueEntries } from './sessionQueue.js';
import { withdrawLocked, type WithdrawResult } from './queueWithdrawal.js';

/**
 * Queue entries that can never be delivered: the task was deleted or archived, the session was
 * deleted or reached a terminal state (turns/sessionStates.ts), or a Run guarded to the primary
 * waits on a session that is no longer it (primaryGuard.ts). Their waiting entries are
 * cancelled with the reason, as a user's `queue.clear` would remove them: the receipt's outcome
 * says `cancelled` and why, consumed comments go back to the task's collection (dropped when the
 * plan is gone), attachments back to staged. A session in a state this service does not know is
 * not finished: its entries wait.
 */

/** What a finished queue is, scoped to one task, one session, or every queue of the database. */
export type FinishedScope = { taskId: string } | { sessionId: string } | 'all';

export interface FinishedQueue {
  sessionId: string;
  taskId: string;
  /** `task_deleted`, `task_archived`, `session_deleted`, `session_completed`, `session_failed`, `session_cancelled` or `primary_session_changed`. */
  reason: string;
  /** Waiting entries when listed. */
  waiting: number;
}

/**
 * The rule as one SQL expression over an entry aliased `q`, its task row `t` and its session row
 * `s` (both possibly absent: NULL): why the entry can never be delivered, or NULL.
 */
function finishReasonSql(dialect: SqlDialect): string {
  return (
    `CASE WHEN t.id IS NULL THEN 'task_deleted' WHEN t.archived_at IS NOT NULL THEN 'task_archived' WHEN s.id IS NULL THEN 'session_deleted'` +
    TERMINAL_SESSION_STATES.map((state) => ` WHEN s.state = '${state}' THEN 'session_${state.toLowerCase()}'`).join('') +
    ` WHEN ${primaryGuardBroken(dialect, 'q', 's')} THEN 'primary_session_changed' ELSE NULL END`
  );
}

const ENTRY_ROWS = (table: ReceiptTable) => `${table} q LEFT JOIN tasks t ON t.id = q.task_id LEFT JOIN task_sessions s ON s.id = q.session_id`;

/** The finished queues of the scope that still have waiting entries, by session and reason, in session order. */
export async function listFinishedQueues(ctx: RepositoryContext, table: ReceiptTable, scope: FinishedScope): Promise<FinishedQueue[]> {
  const where =
    scope === 'all'
      ? { sql: '', bindings: [] }
      : 'taskId' in scope
        ? { sql: 'AND q.task_id = ?', bindings: [scope.taskId] }
        : { sql: 'AND q.session_id = ?', bindings: [scope.sessionId] };
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT session_id, task_id, reason, COUNT(*) AS waiting FROM (
       SELECT q.session_id, q.task_id, ${finishReasonSql(ctx.dialect)} AS reason
         FROM ${ENTRY_ROWS(table)} WHERE ${waitingReceiptPredicate(ctx.dialect, 'q')} ${where.sql}) f
      WHERE reason IS NOT NULL GROUP BY session_id, task_id, reason ORDER BY ${ctx.dialect.binaryText('session_id')}, reason`,
    where.bindings,
  );
  return rows.map((r) => ({ sessionId: String(r.session_id), taskId: String(r.task_id), reason: String(r.reason), waiting: Number(r.waiting) }));
}

export type CancelFinishedResult = (Extract<WithdrawResult, { ok: true }> & { reasons: string[] }) | Unavailable;

/**
 * Cancels every waiting entry of the session that can never be delivered, in one transaction under
 * the queue's locks (the task row when it still exists, the session's turn-write lock, the entries'
 * rows), rereading the rule under them: an entry a listing found finished is cancelled only if it
 * still is. `reasons` empty: none was (nothing changed).
 */
export function cancelFinishedQueue(ctx: RepositoryContext, schema: PlanCommentSchema, taskId: string, sessionId: string): Promise<CancelFinishedResult> {
  const table = schema.receiptTable;
  if (!table || schema.missingForPrompts.length > 0) return Promise.resolve(unavailable('the prompt queue', schema.missingForPrompts));
  return beginOrNest(ctx, async (tx): Promise<CancelFinishedResult> => {
    await rawRows(tx, `SELECT id FROM tasks WHERE id = ?${tx.dialect.forUpdate}`, [taskId]);
    await lockSessionTurnWrites(tx, [sessionId]);
    const waiting = (await lockQueueEntries(tx, table, sessionId)).filter((f) => f.waiting).map((f) => f.receipt);
    const reasons = await entryReasons(tx, table, sessionId);
    const byReason = new Map<string, typeof waiting>();
    for (const receipt of waiting) {
      const reason = reasons.get(receipt.id);
      if (reason) byReason.set(reason, [...(byReason.get(reason) ?? []), receipt]);
    }
    let result = await withdrawLocked(tx, table, { taskId, sessionId, targets: [], status: 'cancelled', reason: '' });
    for (const [reason, targets] of byReason) {
      const step = await withdrawLocked(tx, table, { taskId, sessionId, targets, status: 'cancelled', reason });
      result = {
        ...step,
        withdrawn: [...result.withdrawn, ...step.withdrawn],
        returnedCommentIds: [...result.returnedCommentIds, ...step.returnedCommentIds],
        droppedCommentIds: [...result.droppedCommentIds, ...step.droppedCommentIds],
        snapshot: step.snapshot ?? result.snapshot,
      };
    }
    return { ...result, reasons: [...byReason.keys()] };
  });
}

/** The rule's verdict for each waiting entry of the session, read under the caller's locks. */
async function entryReasons(tx: RepositoryContext, table: ReceiptTable, sessionId: string): Promise<Map<string, string>> {
  const rows = await rawRows<{ id: string; reason: string | null }>(
    tx,
    `SELECT q.id, ${finishReasonSql(tx.dialect)} AS reason FROM ${ENTRY_ROWS(table)} WHERE q.session_id = ? AND ${waitingReceiptPredicate(tx.dialect, 'q')}`,
    [sessionId],
  );
  return new Map(rows.filter((r) => r.reason !== null).map((r) => [String(r.id), String(r.reason)]));
}
