import type { Logger } from 'pino';
import {
  type SemanticSummary,
  canonicalSummaryJson,
  parseStoredSummary,
  semanticallyEqual,
  SummaryParseError,
  toPublishedSummary,
  withPendingAction,
  withQueuedPromptCount,
} from '../events/statusSummary.js';
import type { StoredStatusSummary, TaskPendingState } from '../repository/projection/projectionStore.js';
import { microsToTimestamp, timestampToMicros } from '../timestamps.js';
import type { SummaryUpdate } from './ports.js';

/** A semantic change of a task's summary: the row to compare-and-set, and the replacement to publish once it is accepted. */
export interface SummaryChange {
  row: StoredStatusSummary;
  update: SummaryUpdate;
}

export type Decision = { outcome: 'unchanged'; revision: number } | ({ outcome: 'changed' } & SummaryChange);

/**
 * The write half of a projection, decided from the stored row the caller locked and read: the
 * summary with only the fields this worker owns replaced (`pending_action`, and
 * `queued_prompt_count` when the state carries it) and, when that is a semantic change, the row to
 * compare-and-set at revision+1 and the replacement to publish once it is accepted. `republish`: the
 * bus may hold a revision this row never committed, so an unchanged summary is written and
 * published again at the next revision too.
 */
export function decideNextSummary(logger: Logger, now: string, stored: StoredStatusSummary | undefined, state: TaskPendingState, republish = false): Decision {
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
  const withAction = withPendingAction(current, state.pendingAction);
  const next = state.queuedPromptCount === undefined ? withAction : withQueuedPromptCount(withAction, state.queuedPromptCount);
  if (!republish && stored && !corrupt && stored.workspaceId === state.workspaceId && semanticallyEqual(current, next)) {
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

/** The same change one revision later (the stream already held this one). */
export function atNextRevision<C extends SummaryChange>(change: C, now: string): C {
  const revision = change.row.revision + 1;
  const updatedAt = updatedAtAfter(now, change.row.updatedAt);
  return {
    ...change,
    row: { ...change.row, revision, updatedAt },
    update: { ...change.update, summary: { ...change.update.summary, revision, updated_at: updatedAt } },
  };
}

/** `now`, or just after `previous` if it is not later: clients ordering by updated_at agree with revision. */
function updatedAtAfter(now: string, previous: string): string {
  return timestampToMicros(now) <= timestampToMicros(previous) ? microsToTimestamp(timestampToMicros(previous) + 1) : now;
}
