import { rawRows, type RepositoryContext } from '../context.js';
import { toPromptReceiptRecord, type PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import { waitingReceiptPredicate } from './queuedPrompts.js';

/**
 * The locks and the read every change of a session's queue starts with (remove, clear, update,
 * reorder, cancellation), in Kandev's order: the task row, the session's turn-write lock (the one
 * `reserveHead` takes first, so a change and a dispatcher's reservation of one entry serialise),
 * then the entries' rows.
 */

type Row = Record<string, unknown>;

/** Locks the session's task row and its turn writes; returns its task, or undefined when the session does not exist. */
export async function lockSessionQueue(tx: RepositoryContext, sessionId: string): Promise<string | undefined> {
  const session = (await rawRows<Row>(tx, `SELECT task_id FROM task_sessions WHERE id = ?`, [sessionId]))[0];
  if (!session) return undefined;
  const taskId = String(session.task_id);
  await rawRows(tx, `SELECT id FROM tasks WHERE id = ?${tx.dialect.forUpdate}`, [taskId]);
  await lockSessionTurnWrites(tx, [sessionId]);
  return taskId;
}

export interface QueueEntryRow {
  receipt: PromptReceiptRecord;
  /** Whether it is waiting (queuedPrompts.ts): only a waiting entry may change; any other is being delivered. */
  waiting: boolean;
}

/** The session's queue entries (all of them, or the named ones), row-locked, each with the waiting rule's verdict. */
export async function lockQueueEntries(tx: RepositoryContext, table: ReceiptTable, sessionId: string, ids?: readonly string[]): Promise<QueueEntryRow[]> {
  const named = ids ? tx.dialect.inList('q.id', ids) : undefined;
  // The waiting rule itself, as a column, so "may change" is never a second reading of it.
  const rows = await rawRows<Row>(
    tx,
    `SELECT q.*, CASE WHEN ${waitingReceiptPredicate(tx.dialect, 'q')} THEN 1 ELSE 0 END AS waiting_now
       FROM ${table} q WHERE q.session_id = ? AND q.delivery_kind = 'queued'${named ? ` AND ${named.sql}` : ''}${tx.dialect.forUpdate}`,
    [sessionId, ...(named?.bindings ?? [])],
  );
  return rows.map((row) => ({ receipt: toPromptReceiptRecord(row), waiting: Number(row.waiting_now) === 1 }));
}
