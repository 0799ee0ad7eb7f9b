import { rawRows, type RepositoryContext } from '../context.js';
import { readStoredTimestamp } from '../../timestamps.js';

/** A `task_status_summaries` row; `summary` is the stored semantic JSON text. */
export interface StoredStatusSummary {
  taskId: string;
  workspaceId: string;
  revision: number;
  summary: string;
  updatedAt: string;
}

type Row = Record<string, unknown>;

function toStored(row: Row): StoredStatusSummary {
  return {
    taskId: String(row.task_id),
    workspaceId: String(row.workspace_id),
    revision: Number(row.revision),
    summary: String(row.summary),
    updatedAt: readStoredTimestamp(String(row.updated_at)),
  };
}

/**
 * Reads the rows inside a transaction and, on PostgreSQL, row-locks them until commit, in task id
 * order (no deadlock between batches), so a concurrent projector of the same task (another replica)
 * waits: revisions are then committed AND published in order. SQLite gives the same order for free:
 * its write transactions are serialised already (`SqlDialect.singleWriter`).
 */
export async function readStatusSummariesForUpdate(tx: RepositoryContext, taskIds: readonly string[]): Promise<Map<string, StoredStatusSummary>> {
  const result = new Map<string, StoredStatusSummary>();
  if (taskIds.length === 0) return result;
  const members = tx.dialect.inList('task_id', taskIds);
  const lock = tx.dialect.singleWriter ? '' : ` ORDER BY ${tx.dialect.binaryText('task_id')} FOR UPDATE`;
  for (const row of await rawRows<Row>(tx, `SELECT * FROM task_status_summaries WHERE ${members.sql}${lock}`, members.bindings)) {
    const stored = toStored(row);
    result.set(stored.taskId, stored);
  }
  return result;
}

export async function loadStatusSummaries(ctx: RepositoryContext, taskIds: readonly string[]): Promise<Map<string, StoredStatusSummary>> {
  const result = new Map<string, StoredStatusSummary>();
  if (taskIds.length === 0) return result;
  const members = ctx.dialect.inList('task_id', taskIds);
  for (const row of await rawRows<Row>(ctx, `SELECT * FROM task_status_summaries WHERE ${members.sql}`, members.bindings)) {
    const stored = toStored(row);
    result.set(stored.taskId, stored);
  }
  return result;
}

/** Stored summaries in task id order after `afterTaskId` (keyset pages for refilling the bus's copy). */
export async function listStatusSummariesAfter(ctx: RepositoryContext, afterTaskId: string | null, limit: number): Promise<StoredStatusSummary[]> {
  const query = ctx.knex('task_status_summaries').select('*').orderBy('task_id').limit(limit);
  if (afterTaskId !== null) query.where('task_id', '>', afterTaskId);
  return (await query).map((row: Row) => toStored(row));
}

export async function countStatusSummaries(ctx: RepositoryContext): Promise<number> {
  const row = await ctx.knex('task_status_summaries').count<{ n: number | string }[]>({ n: '*' }).first();
  return Number(row?.n ?? 0);
}

// Five bindings per row: well under SQLite's 32,766 and PostgreSQL's 65,535 per statement.
const CAS_ROWS_PER_STATEMENT = 1000;

/**
 * Kandev's compare-and-set, for many tasks in one statement per thousand rows (a reconcile page of
 * repairs costs one round trip, not one per task): insert, or replace only when the stored revision
 * is older AND something semantic differs. Resolves to the task ids whose row was written; a task
 * left out lost (a newer or equal revision is stored, or nothing changed).
 */
export async function compareAndSetStatusSummaries(ctx: RepositoryContext, next: readonly StoredStatusSummary[]): Promise<Set<string>> {
  const seen = new Set<string>();
  for (const row of next) {
    if (!row.taskId) throw new Error('task id required');
    if (!(row.revision > 0)) throw new RangeError(`revision must be positive, got ${row.revision}`);
    // PostgreSQL refuses to update one row twice in a statement; a caller doing so has a bug.
    if (seen.has(row.taskId)) throw new Error(`task ${row.taskId} appears twice in one compare-and-set`);
    seen.add(row.taskId);
  }
  const accepted = new Set<string>();
  for (let i = 0; i < next.length; i += CAS_ROWS_PER_STATEMENT) {
    const chunk = next.slice(i, i + CAS_ROWS_PER_STATEMENT);
    const rows = await rawRows<Row>(
      ctx,
      `INSERT INTO task_status_summaries (task_id, workspace_id, revision, summary, updated_at)
       VALUES ${chunk.map(() => '(?, ?, ?, ?, ?)').join(', ')}
       ON CONFLICT (task_id) DO UPDATE SET
         workspace_id = excluded.workspace_id, revision = excluded.revision,
         summary = excluded.summary, updated_at = excluded.updated_at
       WHERE task_status_summaries.revision < excluded.revision
         AND (task_status_summaries.workspace_id <> excluded.workspace_id OR task_status_summaries.summary <> excluded.summary)
       RETURNING task_id`,
      chunk.flatMap((row) => [row.taskId, row.workspaceId, row.revision, row.summary, ctx.dialect.storedTimestamp(row.updatedAt)]),
    );
    for (const row of rows) accepted.add(String(row.task_id));
  }
  return accepted;
}

/**
 * Puts rows back as they were before a compare-and-set in the same transaction (`previous`
 * undefined: the row did not exist). For the tasks of a batch whose publish the bus refused: their
 * rows are still locked by the caller, so nobody saw the new revision, and the batch can commit
 * the others.
 */
export async function restoreStatusSummaries(
  tx: RepositoryContext,
  restores: ReadonlyArray<{ taskId: string; previous: StoredStatusSummary | undefined }>,
): Promise<void> {
  for (const { taskId, previous } of restores) {
    if (previous) await overwriteLockedStatusSummaries(tx, [previous]);
    else await tx.knex.raw('DELETE FROM task_status_summaries WHERE task_id = ?', [taskId]);
  }
}

/**
 * Writes rows as given over rows the caller's transaction has locked and compare-and-set (no
 * compare: nobody else can have written them since).
 */
export async function overwriteLockedStatusSummaries(tx: RepositoryContext, rows: readonly StoredStatusSummary[]): Promise<void> {
  for (const row of rows) {
    await tx.knex.raw('UPDATE task_status_summaries SET workspace_id = ?, revision = ?, summary = ?, updated_at = ? WHERE task_id = ?', [
      row.workspaceId,
      row.revision,
      row.summary,
      tx.dialect.storedTimestamp(row.updatedAt),
      row.taskId,
    ]);
  }
}
