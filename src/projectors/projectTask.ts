import type { Logger } from 'pino';
import { withTransaction, type RepositoryContext } from '../repository/context.js';
import { loadTaskPendingState, type TaskPendingState } from '../repository/pendingActions.js';
import { compareAndSetStatusSummary, readStatusSummaryForUpdate } from '../repository/statusSummaries.js';
import { microsToTimestamp, timestampToMicros } from '../repository/timestamps.js';
import {
  type SemanticSummary,
  canonicalSummaryJson,
  parseStoredSummary,
  semanticallyEqual,
  SummaryParseError,
  toPublishedSummary,
  withPendingAction,
} from '../events/statusSummary.js';
import { ConflictExhaustedError } from '../errors.js';
import type { SummaryPublisher } from './ports.js';

export type ProjectionResult =
  | { outcome: 'changed'; revision: number; state: TaskPendingState }
  | { outcome: 'unchanged'; revision: number; state: TaskPendingState }
  | { outcome: 'unknown_task' };

export interface ProjectTaskDeps {
  ctx: RepositoryContext;
  publisher: SummaryPublisher;
  logger: Logger;
  /** Compare-and-set attempts before giving up with ConflictExhaustedError (Kandev uses 3). */
  maxAttempts?: number;
  /** Observes every lost compare-and-set (metrics). */
  onConflict?: () => void;
}

/**
 * One level-triggered projection: reread the authoritative pending state, derive the summary from
 * the stored one with only `pending_action` replaced, and when that is a semantic change
 * compare-and-set revision+1 and publish the full replacement, all in one transaction. The publish
 * happens before commit while the summary row is locked, so revisions of a task reach the bus in
 * order even across replicas, and a failed publish leaves nothing stored.
 */
export async function projectTask(deps: ProjectTaskDeps, taskId: string): Promise<ProjectionResult> {
  const maxAttempts = deps.maxAttempts ?? 3;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const result = await withTransaction(deps.ctx, async (tx): Promise<ProjectionResult | 'conflict'> => {
      const stored = await readStatusSummaryForUpdate(tx, taskId);
      const state = await loadTaskPendingState(tx, taskId);
      if (!state) return { outcome: 'unknown_task' };
      let current: SemanticSummary = {};
      let corrupt = false;
      try {
        if (stored) current = parseStoredSummary(stored.summary);
      } catch (err) {
        if (!(err instanceof SummaryParseError)) throw err;
        // Unreadable by every consumer (Kandev rejects the row outright), so it carries nothing to
        // preserve: replace it with a valid summary at the next revision instead of failing forever.
        corrupt = true;
        deps.logger.warn({ taskId, err: err.message }, 'stored summary is corrupt; replacing it');
      }
      const next = withPendingAction(current, state.pendingAction);
      if (stored && !corrupt && stored.workspaceId === state.workspaceId && semanticallyEqual(current, next)) {
        return { outcome: 'unchanged', revision: stored.revision, state };
      }
      const revision = (stored?.revision ?? 0) + 1;
      if (!Number.isSafeInteger(revision)) throw new RangeError(`task ${taskId}: revision overflow`);
      // Strictly after the stored instant, so clients ordering by updated_at agree with revision.
      const now = tx.clock();
      const updatedAt = stored && timestampToMicros(now) <= timestampToMicros(stored.updatedAt) ? microsToTimestamp(timestampToMicros(stored.updatedAt) + 1) : now;
      const accepted = await compareAndSetStatusSummary(tx, {
        taskId,
        workspaceId: state.workspaceId,
        revision,
        summary: canonicalSummaryJson(next),
        updatedAt,
      });
      if (!accepted) return 'conflict';
      await deps.publisher.publishSummary({ taskId, workspaceId: state.workspaceId, summary: toPublishedSummary(next, revision, updatedAt) });
      return { outcome: 'changed', revision, state };
    });
    if (result !== 'conflict') return result;
    deps.onConflict?.();
    deps.logger.debug({ taskId, attempt }, 'summary compare-and-set lost; rereading');
  }
  throw new ConflictExhaustedError(taskId, maxAttempts);
}
