import { rawRows, type RepositoryContext } from './context.js';

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
    updatedAt: String(row.updated_at),
  };
}

/**
 * Reads the row inside a transaction and, on PostgreSQL, row-locks it until commit, so a concurrent
 * projector of the same task (another replica) waits: revisions are then committed AND published in
 * order. SQLite's single writer gives the same order for free.
 */
export async function readStatusSummaryForUpdate(tx: RepositoryContext, taskId: string): Promise<StoredStatusSummary | undefined> {
  const lock = tx.dialect.name === 'postgres' ? ' FOR UPDATE' : '';
  const rows = await rawRows<Row>(tx, `SELECT * FROM task_status_summaries WHERE task_id = ?${lock}`, [taskId]);
  return rows[0] ? toStored(rows[0]) : undefined;
}

/** The batched form of `readStatusSummaryForUpdate`, locking in task id order (no deadlock between batches). */
export async function readStatusSummariesForUpdate(tx: RepositoryContext, taskIds: readonly string[]): Promise<Map<string, StoredStatusSummary>> {
  const result = new Map<string, StoredStatusSummary>();
  if (taskIds.length === 0) return result;
  const members = tx.dialect.inList('task_id', taskIds);
  const lock = tx.dialect.name === 'postgres' ? ` ORDER BY ${tx.dialect.binaryText('task_id')} FOR UPDATE` : '';
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

/**
 * Kandev's compare-and-set: insert, or replace only when the stored revision is older AND something
 * semantic differs. False means "lost" (a newer or equal revision is stored, or nothing changed).
 */
export async function compareAndSetStatusSummary(ctx: RepositoryContext, next: StoredStatusSummary): Promise<boolean> {
  if (!next.taskId) throw new Error('task id required');
  if (!(next.revision > 0)) throw new RangeError(`revision must be positive, got ${next.revision}`);
  const rows = await rawRows<Row>(
    ctx,
    `INSERT INTO task_status_summaries (task_id, workspace_id, revision, summary, updated_at)
     VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (task_id) DO UPDATE SET
       workspace_id = excluded.workspace_id, revision = excluded.revision,
       summary = excluded.summary, updated_at = excluded.updated_at
     WHERE task_status_summaries.revision < excluded.revision
       AND (task_status_summaries.workspace_id <> excluded.workspace_id OR task_status_summaries.summary <> excluded.summary)
     RETURNING task_id`,
    [next.taskId, next.workspaceId, next.revision, next.summary, next.updatedAt],
  );
  return rows.length > 0;
}
