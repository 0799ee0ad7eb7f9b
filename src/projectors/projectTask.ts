import type { Logger } from 'pino';
import { withTransaction, type RepositoryContext } from '../repository/context.js';
import { loadTaskPendingStates, type TaskPendingState } from '../repository/pendingActions.js';
import {
  compareAndSetStatusSummaries,
  overwriteLockedStatusSummaries,
  readStatusSummariesForUpdate,
  restoreStatusSummaries,
  type StoredStatusSummary,
} from '../repository/statusSummaries.js';
import { microsToTimestamp, timestampToMicros } from '../timestamps.js';
import {
  type SemanticSummary,
  canonicalSummaryJson,
  parseStoredSummary,
  semanticallyEqual,
  SummaryParseError,
  toPublishedSummary,
  withPendingAction,
} from '../events/statusSummary.js';
import { ConflictExhaustedError, DuplicateRevisionsError } from '../errors.js';
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
  /** Called once the replacements are published and only COMMIT is left. */
  beforeCommit?: () => void;
}

type Decision = { outcome: 'unchanged'; revision: number } | { outcome: 'changed'; row: StoredStatusSummary; update: SummaryUpdate };

/**
 * The write half of a projection, decided from the stored row the caller locked and read: the
 * summary with only `pending_action` replaced and, when that is a semantic change, the row to
 * compare-and-set at revision+1 and the replacement to publish once it is accepted.
 */
export function decideNextSummary(logger: Logger, now: string, stored: StoredStatusSummary | undefined, state: TaskPendingState): Decision {
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
  const updatedAt = stored ? updatedAtAfter(now, stored.updatedAt) : now;
  return {
    outcome: 'changed',
    row: { taskId, workspaceId: state.workspaceId, revision, summary: canonicalSummaryJson(next), updatedAt },
    update: { taskId, workspaceId: state.workspaceId, summary: toPublishedSummary(next, revision, updatedAt) },
  };
}

/**
 * One level-triggered projection: reread the authoritative pending state, derive the summary from
 * the stored one with only `pending_action` replaced, and when that is a semantic change
 * compare-and-set revision+1 and publish the full replacement, all in one transaction. The publish
 * happens before commit while the summary row is locked, so revisions of a task reach the bus in
 * order even across replicas, and a failed publish leaves nothing stored. The batch of one task
 * (`projectTasks`), reread after a lost compare-and-set.
 */
export async function projectTask(deps: ProjectTaskDeps, taskId: string): Promise<ProjectionResult> {
  const maxAttempts = deps.maxAttempts ?? 3;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const batch = await projectTasks(deps, [taskId]);
    if (batch.failed.has(taskId)) throw batch.failed.get(taskId);
    const result = batch.results.get(taskId);
    if (result) return result;
    deps.logger.debug({ taskId, attempt }, 'summary compare-and-set lost; rereading');
  }
  throw new ConflictExhaustedError(taskId, maxAttempts);
}

/**
 * A stream keeps the first payload of a (task, revision) for its duplicate window, so a revision an
 * earlier attempt published but did not commit (the KV put or the COMMIT after it failed, or the
 * publish's ack was lost) cannot be published again with what is true now. Such a task moves on to
 * the next revision, at most this many times in one transaction.
 */
const MAX_REVISION_BUMPS = 3;

/** `now`, or just after `previous` if it is not later: clients ordering by updated_at agree with revision. */
function updatedAtAfter(now: string, previous: string): string {
  return timestampToMicros(now) <= timestampToMicros(previous) ? microsToTimestamp(timestampToMicros(previous) + 1) : now;
}

function atNextRevision<C extends { row: StoredStatusSummary; update: SummaryUpdate }>(c: C, now: string): C {
  const revision = c.row.revision + 1;
  const updatedAt = updatedAtAfter(now, c.row.updatedAt);
  return { ...c, row: { ...c.row, revision, updatedAt }, update: { ...c.update, summary: { ...c.update.summary, revision, updated_at: updatedAt } } };
}

export interface BatchProjection {
  /** Tasks projected in the batch, by id. */
  results: Map<string, ProjectionResult>;
  /** Tasks whose compare-and-set lost (a concurrent first insert): project them one by one. */
  conflicts: string[];
  /**
   * Tasks whose publish the bus refused (or whose every revision tried it already held), with the
   * error: their rows were put back, nothing stored.
   */
  failed: Map<string, unknown>;
}

/**
 * Projects many tasks in ONE transaction: lock and read their summaries and pending states in
 * batched statements, compare-and-set every change in one statement, then publish every
 * replacement concurrently before commit. Same rules and ordering guarantees as `projectTask`
 * (rows stay locked while their revisions are published), but the bus round trips overlap instead
 * of adding up: a reconcile batch of repairs costs about one round trip, not one per task. A task
 * whose publish fails has its row put back before commit and is reported in `failed`; the others
 * commit, since their revisions are on the bus (rolling them back would leave the bus a revision
 * ahead of the rows).
 */
export async function projectTasks(deps: ProjectTaskDeps, taskIds: readonly string[]): Promise<BatchProjection> {
  return withTransaction(deps.ctx, async (tx) => {
    const stored = await readStatusSummariesForUpdate(tx, taskIds);
    const states = await loadTaskPendingStates(tx, taskIds);
    const results = new Map<string, ProjectionResult>();
    const changed: Array<{ row: StoredStatusSummary; update: SummaryUpdate; state: TaskPendingState }> = [];
    const now = tx.clock();
    for (const taskId of new Set(taskIds)) {
      const state = states.get(taskId);
      if (!state) {
        results.set(taskId, { outcome: 'unknown_task' });
        continue;
      }
      const step = decideNextSummary(deps.logger, now, stored.get(taskId), state);
      if (step.outcome === 'unchanged') results.set(taskId, { outcome: 'unchanged', revision: step.revision, state });
      else changed.push({ ...step, state });
    }
    const accepted = await compareAndSetStatusSummaries(tx, changed.map((c) => c.row));
    const conflicts: string[] = [];
    let publishing: typeof changed = [];
    for (const c of changed) {
      if (accepted.has(c.row.taskId)) publishing.push(c);
      else {
        deps.onConflict?.();
        conflicts.push(c.row.taskId);
      }
    }
    const failed = new Map<string, unknown>();
    for (let bumps = 0; publishing.length > 0; bumps++) {
      const published = await Promise.allSettled(publishing.map((c) => deps.publisher.publishSummary(c.update)));
      const duplicates: typeof changed = [];
      publishing.forEach((c, i) => {
        const outcome = published[i]!;
        const taskId = c.row.taskId;
        if (outcome.status === 'rejected') failed.set(taskId, outcome.reason);
        else if (outcome.value === 'published') results.set(taskId, { outcome: 'changed', revision: c.row.revision, state: c.state });
        else if (bumps < MAX_REVISION_BUMPS) duplicates.push(c);
        else failed.set(taskId, new DuplicateRevisionsError(taskId, c.row.revision - bumps, c.row.revision));
      });
      if (duplicates.length === 0) break;
      deps.logger.warn({ tasks: duplicates.map((c) => `${c.row.taskId}:${c.row.revision}`) }, 'the stream already held these revisions from an attempt that did not commit; publishing at the next revision');
      // Still under the row lock: the stored row follows the revision the stream will have.
      publishing = duplicates.map((c) => atNextRevision(c, now));
      await overwriteLockedStatusSummaries(tx, publishing.map((c) => c.row));
    }
    if (failed.size > 0) await restoreStatusSummaries(tx, [...failed.keys()].map((taskId) => ({ taskId, previous: stored.get(taskId) })));
    deps.beforeCommit?.();
    return { results, conflicts, failed };
  });
}
