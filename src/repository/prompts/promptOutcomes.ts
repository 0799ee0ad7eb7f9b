import { rawRows, type RepositoryContext } from '../context.js';
import { parseMetadata, str } from '../rowMapping.js';
import { readStoredTimestamp } from '../../timestamps.js';

/**
 * What became of a receipt that left without being delivered (`pending_projector_prompt_outcomes`):
 * removed by a user, or cancelled by the service with its reason. The receipt row is deleted (so it
 * stops counting and no dispatcher can see it); this record keeps the caller id's answer, so a replay
 * of the original request says what happened instead of queueing the prompt again.
 */

type PromptOutcomeStatus = 'removed' | 'cancelled';

export interface PromptOutcome {
  /** The caller id (the receipt's id). */
  id: string;
  sessionId: string;
  taskId: string;
  deliveryKind: string;
  status: PromptOutcomeStatus;
  /** '' for a user's removal; `task_archived`, `session_completed`, `primary_session_changed`, ... for a cancel. */
  reason: string;
  /** The original request's fingerprint, so a replay of another request under the id is still a caller-id conflict. */
  fingerprint: string;
  /** Free-form facts of the withdrawal (which comments came back, which were dropped). */
  detail: Record<string, unknown>;
  settledAt: string;
}

export async function recordPromptOutcome(tx: RepositoryContext, outcome: Omit<PromptOutcome, 'settledAt'>): Promise<void> {
  await rawRows(
    tx,
    `INSERT INTO pending_projector_prompt_outcomes (id, session_id, task_id, delivery_kind, status, reason, request_fingerprint, detail_json, settled_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      outcome.id,
      outcome.sessionId,
      outcome.taskId,
      outcome.deliveryKind,
      outcome.status,
      outcome.reason,
      outcome.fingerprint,
      JSON.stringify(outcome.detail),
      tx.clock(),
    ],
  );
}

export async function getPromptOutcome(ctx: RepositoryContext, id: string): Promise<PromptOutcome | undefined> {
  const row = (await rawRows<Record<string, unknown>>(ctx, `SELECT * FROM pending_projector_prompt_outcomes WHERE id = ?`, [id]))[0];
  if (!row) return undefined;
  return {
    id: str(row.id),
    sessionId: str(row.session_id),
    taskId: str(row.task_id),
    deliveryKind: str(row.delivery_kind),
    status: row.status === 'cancelled' ? 'cancelled' : 'removed',
    reason: str(row.reason),
    fingerprint: str(row.request_fingerprint),
    detail: parseMetadata(row.detail_json).metadata,
    settledAt: readStoredTimestamp(str(row.settled_at)),
  };
}
