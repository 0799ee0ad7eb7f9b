import type { Logger } from 'pino';
import { withTransaction, type RepositoryContext } from '../repository/context.js';
import { loadTaskPendingState, loadTaskPendingStates, type TaskPendingState } from '../repository/pendingActions.js';
import {
  compareAndSetStatusSummary,
  readStatusSummariesForUpdate,
  readStatusSummaryForUpdate,
  type StoredStatusSummary,
} from '../repository/statusSummaries.js';
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
import type { SummaryPublisher, SummaryUpdate } from './ports.js';

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

type StepResult = { outcome: 'unchanged'; revision: number } | { outcome: 'changed'; update: SummaryUpdate } | 'conflict';

/**
 * The write half of a projection, inside the caller's transaction after it locked and read the
 * stored row: derive the summary with only `pending_action` replaced and, when that is a semantic
 * change, compare-and-set revision+1. Returns what must be published (before commit).
 */
export async function storeNextSummary(
  tx: RepositoryContext,
  logger: Logger,
  stored: StoredStatusSummary | undefined,
  state: TaskPendingState,
): Promise<StepResult> {
  const { taskId } = state;
  let current: SemanticSummary = {};
  let corrupt = false;
  try {
    if (stored) current = parseStoredSummary(stored.summary);
  } catch (err) {
    if (!(err instanceof SummaryParseError)) throw err;
    // Unreadable by every consumer (Kandev rejects the row outright), so it carries nothing to
    // preserve: replace it with a valid summary at the next revision instead of failing forever.
    corrupt = true;
    logger.warn({ taskId, err: err.message }, 'stored summary is corrupt; replacing it');
  }
  const next = withPendingAction(current, state.pendingAction);
  if (stored && !corrupt && stored.workspaceId === state.workspaceId && semanticallyEqual(current, next)) {
    return { outcome: 'unchanged', revision: stored.revision };
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
  return { outcome: 'changed', update: { taskId, workspaceId: state.workspaceId, summary: toPublishedSummary(next, revision, updatedAt) } };
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
      const step = await storeNextSummary(tx, deps.logger, stored, state);
      if (step === 'conflict') return step;
      if (step.outcome === 'unchanged') return { outcome: 'unchanged', revision: step.revision, state };
      await deps.publisher.publishSummary(step.update);
      return { outcome: 'changed', revision: step.update.summary.revision, state };
    });
    if (result !== 'conflict') return result;
    deps.onConflict?.();
    deps.logger.debug({ taskId, attempt }, 'summary compare-and-set lost; rereading');
  }
  throw new ConflictExhaustedError(taskId, maxAttempts);
}

export interface BatchProjection {
  /** Tasks projected in the batch, by id. */
  results: Map<string, ProjectionResult>;
  /** Tasks whose compare-and-set lost (a concurrent first insert): project them one by one. */
  conflicts: string[];
}

/**
 * Projects many tasks in ONE transaction: lock and read their summaries and pending states in
 * batched statements, compare-and-set each change, then publish every replacement concurrently
 * before commit. Same rules and ordering guarantees as `projectTask` (rows stay locked while their
 * revisions are published), but the bus round trips overlap instead of adding up: a reconcile page
 * of repairs costs about one round trip, not one per task.
 */
export async function projectTasks(deps: ProjectTaskDeps, taskIds: readonly string[]): Promise<BatchProjection> {
  return withTransaction(deps.ctx, async (tx) => {
    const stored = await readStatusSummariesForUpdate(tx, taskIds);
    const states = await loadTaskPendingStates(tx, taskIds);
    const results = new Map<string, ProjectionResult>();
    const conflicts: string[] = [];
    const updates: SummaryUpdate[] = [];
    for (const taskId of taskIds) {
      const state = states.get(taskId);
      if (!state) {
        results.set(taskId, { outcome: 'unknown_task' });
        continue;
      }
      const step = await storeNextSummary(tx, deps.logger, stored.get(taskId), state);
      if (step === 'conflict') {
        deps.onConflict?.();
        conflicts.push(taskId);
      } else if (step.outcome === 'unchanged') {
        results.set(taskId, { outcome: 'unchanged', revision: step.revision, state });
      } else {
        updates.push(step.update);
        results.set(taskId, { outcome: 'changed', revision: step.update.summary.revision, state });
      }
    }
    await Promise.all(updates.map((u) => deps.publisher.publishSummary(u)));
    return { results, conflicts };
  });
}
