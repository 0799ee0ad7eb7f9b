import { rawRows, type RepositoryContext } from '../context.js';

/**
 * A session's queue revision: one counter per session (`pending_projector_queue_revisions`), moved
 * by every change of its waiting set or order (an entry accepted, reserved, released, removed,
 * cancelled, reordered). `queue.list` shows it and `queue.reorder` compares it, so a reorder drawn
 * from a stale list is refused instead of silently reordering entries its author never saw.
 * A session without a row is at revision 0.
 */

/** Moves the session's revision by one inside `tx` and returns the new value. */
export async function bumpQueueRevision(tx: RepositoryContext, sessionId: string): Promise<number> {
  const rows = await rawRows<{ revision: number | string }>(
    tx,
    `INSERT INTO pending_projector_queue_revisions (session_id, revision) VALUES (?, 1)
     ON CONFLICT (session_id) DO UPDATE SET revision = pending_projector_queue_revisions.revision + 1
     RETURNING revision`,
    [sessionId],
  );
  return Number(rows[0]!.revision);
}

export async function readQueueRevision(ctx: RepositoryContext, sessionId: string): Promise<number> {
  const rows = await rawRows<{ revision: number | string }>(ctx, `SELECT revision FROM pending_projector_queue_revisions WHERE session_id = ?`, [sessionId]);
  return rows[0] ? Number(rows[0].revision) : 0;
}
