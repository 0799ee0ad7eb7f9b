import { parseStoredSummary, pendingActionOf, queuedPromptCountOf } from '../events/statusSummary.js';
import type { ProjectionStore } from '../repository/projection/projectionStore.js';
import type { PendingAction } from '../turns/pendingAction.js';
import type { DriftPayload } from '../contract/operationsPayloads.js';

type DriftKind = 'missing' | 'stale' | 'corrupt';

export interface TaskDrift {
  taskId: string;
  kind: DriftKind;
  stored: PendingAction | null;
  derived: PendingAction | null;
  /** `queued_prompt_count` as stored (0: omitted) and as derived now. */
  storedQueuedPromptCount: number;
  derivedQueuedPromptCount: number;
}

/** A drift as `verify --json` prints it and `summary.verify` replies it. */
export function toDriftPayload(d: TaskDrift): DriftPayload {
  return {
    task_id: d.taskId,
    kind: d.kind,
    stored: d.stored,
    derived: d.derived,
    stored_queued_prompt_count: d.storedQueuedPromptCount,
    derived_queued_prompt_count: d.derivedQueuedPromptCount,
  };
}

/**
 * Compares a page of tasks' stored summaries with a fresh derivation, in three batched statements
 * (sessions, windowed pending actions, summaries) whatever the page size.
 */
export async function findDrift(store: ProjectionStore, taskIds: readonly string[]): Promise<TaskDrift[]> {
  const [states, summaries] = await Promise.all([store.loadPendingStates(taskIds), store.loadStatusSummaries(taskIds)]);
  const drift: TaskDrift[] = [];
  for (const taskId of taskIds) {
    const state = states.get(taskId);
    if (!state) continue; // deleted meanwhile
    const derived = { derived: state.pendingAction, derivedQueuedPromptCount: state.queuedPromptCount ?? 0 };
    const stored = summaries.get(taskId);
    if (!stored) {
      drift.push({ taskId, kind: 'missing', stored: null, storedQueuedPromptCount: 0, ...derived });
      continue;
    }
    let storedAction: PendingAction | null;
    let storedCount: number;
    try {
      const summary = parseStoredSummary(stored.summary);
      storedAction = pendingActionOf(summary);
      storedCount = queuedPromptCountOf(summary);
    } catch {
      drift.push({ taskId, kind: 'corrupt', stored: null, storedQueuedPromptCount: 0, ...derived });
      continue;
    }
    // A count not read (a store without queue tables) is not drift: the projection carries it through.
    const countDiffers = state.queuedPromptCount !== undefined && storedCount !== state.queuedPromptCount;
    if (storedAction !== state.pendingAction || stored.workspaceId !== state.workspaceId || countDiffers) {
      drift.push({ taskId, kind: 'stale', stored: storedAction, storedQueuedPromptCount: storedCount, ...derived });
    }
  }
  return drift;
}

export interface ReconcileProgress {
  visited: number;
  drifted: number;
  repaired: number;
  failed: number;
  lastTaskId: string | null;
}

export interface ReconcileOptions {
  store: ProjectionStore;
  pageSize: number;
  /**
   * Repairs a batch of drifted tasks (fewer than two pages' worth) and resolves to the ids that
   * failed (the projector's batched projection). Omit for a dry run (verify).
   */
  repair?: (taskIds: readonly string[]) => Promise<readonly string[]>;
  /** Restrict to these tasks instead of walking every task by keyset pages. */
  taskIds?: readonly string[];
  /** After each page with the drift found in it, and once more (no drift) after the last repairs. */
  onPage?: (progress: ReconcileProgress, drift: readonly TaskDrift[]) => void;
  /** Checked between pages; true stops the walk early (shutdown). */
  shouldStop?: () => boolean;
  /** Called before each page (lease renewal); throwing stops the walk. */
  beforePage?: () => Promise<void>;
}

/**
 * Walks tasks by keyset pages (memory bounded by one page), finds drift, and repairs only the
 * drifted tasks through the projector's batched projection (the same rules and compare-and-set as a
 * live projection; the database serialises it with live ones). Drifted ids are gathered across
 * pages and repaired once a page's worth is known: a boot after an outage finds a few per page, and
 * one transaction per page for those few would cost more than reading the page did.
 */
export async function reconcileTasks(options: ReconcileOptions): Promise<ReconcileProgress> {
  const progress: ReconcileProgress = { visited: 0, drifted: 0, repaired: 0, failed: 0, lastTaskId: null };
  const explicit = options.taskIds ? [...new Set(options.taskIds)] : undefined;
  let unrepaired: string[] = [];
  const repairGathered = async () => {
    if (!options.repair || unrepaired.length === 0) return;
    const batch = unrepaired;
    unrepaired = [];
    const failed = (await options.repair(batch)).length;
    progress.repaired += batch.length - failed;
    progress.failed += failed;
  };
  for (;;) {
    if (options.shouldStop?.()) break;
    await options.beforePage?.();
    let page: string[];
    if (explicit) {
      page = explicit.splice(0, options.pageSize);
    } else {
      page = await options.store.listTaskIdsAfter(progress.lastTaskId, options.pageSize);
    }
    if (page.length === 0) break;
    const drift = await findDrift(options.store, page);
    progress.visited += page.length;
    progress.drifted += drift.length;
    progress.lastTaskId = page[page.length - 1] ?? progress.lastTaskId;
    for (const d of drift) unrepaired.push(d.taskId);
    if (unrepaired.length >= options.pageSize) await repairGathered();
    options.onPage?.({ ...progress }, drift);
    if (explicit && explicit.length === 0) break;
  }
  // Also when stopping early: at most a page of known drift, cheaper to settle now than to leave.
  if (unrepaired.length > 0) {
    await repairGathered();
    options.onPage?.({ ...progress }, []);
  }
  return progress;
}
