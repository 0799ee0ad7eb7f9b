import { rawRows, type RepositoryContext } from '../context.js';
import { readStoredTimestamp } from '../../timestamps.js';

/**
 * `pending_projector_summary_writes` (migration 0006, `kandev_mode_0004` beside Kandev): per task,
 * the summary revision this service last wrote and the owned fields it wrote there, as the
 * projector's text (`ownedFields`; the repository never reads inside it), plus the last revision it
 * found written by another writer with owned fields changed. Every replica writes it in the
 * transaction of its compare-and-set, so "a revision this service did not write" means the same on
 * every replica (ADR 0018).
 */
export interface SummaryWriteRecord {
  taskId: string;
  /** The revision this service last wrote. */
  revision: number;
  /** The owned fields it wrote at that revision, as the projector serialised them. */
  ownedFields: string;
  /** The last revision found written by another writer (null: none found). */
  foreignRevision: number | null;
}

/** One summary row found written by another writer: its revision and the owned fields that writer changed. */
export interface ForeignSummaryWrite {
  taskId: string;
  revision: number;
  fields: readonly string[];
}

/** A detection as `doctor` reads it back. */
export interface RecordedForeignSummaryWrite extends ForeignSummaryWrite {
  seenAt: string;
  /** Detections recorded for the task since this service first wrote its summary. */
  count: number;
}

type Row = Record<string, unknown>;

/** The records of the tasks (read after their summary rows were locked, so a replica's write that committed first is seen). */
export async function readSummaryWrites(tx: RepositoryContext, taskIds: readonly string[]): Promise<Map<string, SummaryWriteRecord>> {
  const result = new Map<string, SummaryWriteRecord>();
  if (taskIds.length === 0) return result;
  const members = tx.dialect.inList('task_id', taskIds);
  const rows = await rawRows<Row>(
    tx,
    `SELECT task_id, revision, owned_fields, foreign_revision FROM pending_projector_summary_writes WHERE ${members.sql}`,
    members.bindings,
  );
  for (const row of rows) {
    result.set(String(row.task_id), {
      taskId: String(row.task_id),
      revision: Number(row.revision),
      ownedFields: String(row.owned_fields),
      foreignRevision: row.foreign_revision === null || row.foreign_revision === undefined ? null : Number(row.foreign_revision),
    });
  }
  return result;
}

// Four bindings per row, well under either dialect's limit per statement.
const ROWS_PER_STATEMENT = 1000;

/**
 * Records the revisions this service just wrote (in the transaction that wrote them): one upsert
 * per thousand tasks. The detection columns are left as they are.
 */
export async function recordSummaryWrites(
  tx: RepositoryContext,
  writes: ReadonlyArray<{ taskId: string; revision: number; ownedFields: string }>,
): Promise<void> {
  const writtenAt = tx.clock();
  for (let i = 0; i < writes.length; i += ROWS_PER_STATEMENT) {
    const chunk = writes.slice(i, i + ROWS_PER_STATEMENT);
    await tx.knex.raw(
      `INSERT INTO pending_projector_summary_writes (task_id, revision, owned_fields, written_at)
       VALUES ${chunk.map(() => '(?, ?, ?, ?)').join(', ')}
       ON CONFLICT (task_id) DO UPDATE SET revision = excluded.revision, owned_fields = excluded.owned_fields, written_at = excluded.written_at`,
      chunk.flatMap((w) => [w.taskId, w.revision, w.ownedFields, writtenAt]),
    );
  }
}

/** Records summary rows found written by another writer: the revision (so it is counted once), the fields and when. */
export async function recordForeignSummaryWrites(tx: RepositoryContext, found: readonly ForeignSummaryWrite[]): Promise<void> {
  const seenAt = tx.clock();
  for (const write of found) {
    await tx.knex.raw(
      `UPDATE pending_projector_summary_writes
       SET foreign_revision = ?, foreign_fields = ?, foreign_seen_at = ?, foreign_count = foreign_count + 1
       WHERE task_id = ?`,
      [write.revision, write.fields.join(','), seenAt, write.taskId],
    );
  }
}

/**
 * Detections recorded at or after `since`, newest first, at most `limit`, and how many tasks have
 * one in all (`doctor`).
 */
export async function listForeignSummaryWrites(
  ctx: RepositoryContext,
  since: string,
  limit: number,
): Promise<{ tasks: number; recent: RecordedForeignSummaryWrite[] }> {
  const [counted] = await rawRows<{ n: number | string }>(ctx, 'SELECT COUNT(*) AS n FROM pending_projector_summary_writes WHERE foreign_seen_at >= ?', [
    since,
  ]);
  const rows = await rawRows<Row>(
    ctx,
    `SELECT task_id, foreign_revision, foreign_fields, foreign_seen_at, foreign_count FROM pending_projector_summary_writes
     WHERE foreign_seen_at >= ? ORDER BY foreign_seen_at DESC, task_id LIMIT ?`,
    [since, limit],
  );
  return {
    tasks: Number(counted?.n ?? 0),
    recent: rows.map((row) => ({
      taskId: String(row.task_id),
      revision: Number(row.foreign_revision),
      fields: String(row.foreign_fields ?? '')
        .split(',')
        .filter(Boolean),
      seenAt: readStoredTimestamp(String(row.foreign_seen_at)),
      count: Number(row.foreign_count),
    })),
  };
}
