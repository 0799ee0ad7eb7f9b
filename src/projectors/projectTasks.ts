import type { Logger } from 'pino';
import { ConflictExhaustedError, DuplicateRevisionsError } from '../errors.js';
import type { ProjectionStore, ProjectionTransaction, StoredStatusSummary, TaskPendingState } from '../repository/projection/projectionStore.js';
import { atNextRevision, decideNextSummary, type SummaryChange } from './decideNextSummary.js';
import type { SummaryPublisher } from './ports.js';
import { NO_SLOT, type TransactionSlot } from './projectionScheduler.js';

/**
 * What one projection transaction did with one task; every expected outcome is a value.
 * - `changed`: a new revision is committed and on the bus.
 * - `unchanged`: the stored summary already says what is true now.
 * - `conflict`: the compare-and-set lost to a concurrent writer; nothing written or published. The
 *   caller rereads (`rereadOnConflict`).
 * - `bus_refused`: the publish failed (or the stream held every revision tried); the row was put
 *   back as it was, nothing stored.
 * - `unknown_task`: no such task (deleted meanwhile, or never created).
 */
export type TaskProjection =
  | { outcome: 'changed'; revision: number; state: TaskPendingState }
  | { outcome: 'unchanged'; revision: number; state: TaskPendingState }
  | { outcome: 'conflict' }
  | { outcome: 'bus_refused'; error: unknown }
  | { outcome: 'unknown_task' };

/** A settled projection of a task: what its caller sees when it did not fail. */
export type ProjectionResult = Extract<TaskProjection, { outcome: 'changed' | 'unchanged' | 'unknown_task' }>;

/** Each distinct task of a batch, in the order first given, with what became of it. */
export type BatchProjection = Map<string, TaskProjection>;

export interface ProjectTasksDeps {
  store: ProjectionStore;
  publisher: SummaryPublisher;
  logger: Logger;
  /** Observes every lost compare-and-set (metrics). */
  onConflict?: () => void;
  /**
   * Tasks whose replacement reached the bus in a transaction that then failed (its COMMIT, or the
   * connection under it), or whose publish failed (it may have reached the stream all the same):
   * the bus may be a revision ahead of the row, with a summary never stored.
   * Their next projection publishes the stored truth at a new revision even when nothing changed;
   * a committed publish takes them off. The projector's own, kept across batches.
   */
  busAhead?: Set<string>;
}

/** Transactions a task's projection gets before it gives up with ConflictExhaustedError (Kandev uses 3). */
const MAX_CAS_ATTEMPTS = 3;

/**
 * A stream keeps the first payload of a (task, revision) for its duplicate window, so a revision an
 * earlier attempt published but did not commit (the KV put or the COMMIT after it failed, or the
 * publish's ack was lost) cannot be published again with what is true now. Such a task moves on to
 * the next revision, at most this many times in one transaction.
 */
const MAX_REVISION_BUMPS = 3;

/**
 * One level-triggered projection of many tasks in ONE transaction: read them (summary rows locked),
 * decide each summary with only `pending_action` replaced, compare-and-set every change in one
 * statement, then publish every accepted replacement concurrently before commit. The publishes
 * happen while the rows are locked, so revisions of a task reach the bus in order even across
 * replicas, and the bus round trips overlap instead of adding up. A task whose publish fails has its
 * row put back before commit; the others commit, since their revisions are on the bus (rolling them
 * back would leave the bus a revision ahead of the rows).
 *
 * `slot` is released once the transaction no longer needs it: before COMMIT where the store says
 * so (the next batch then runs on another connection beside this COMMIT), else after COMMIT.
 * Throws only when the transaction itself failed (nothing committed).
 */
export async function projectTasks(
  deps: ProjectTasksDeps,
  taskIds: readonly string[],
  slot: Pick<TransactionSlot, 'release'> = NO_SLOT,
): Promise<BatchProjection> {
  const { store } = deps;
  const publishedHere: string[] = [];
  const projected = await store
    .withTransaction(async (tx) => {
      const ids = [...new Set(taskIds)];
      const { stored, states } = await readTasks(tx, ids);
      const now = tx.now();
      const { settled, changes, republishes } = decideTasks(deps.logger, now, ids, stored, states, deps.busAhead);
      const { accepted, lost } = await compareAndSet(tx, changes);
      // The same content at the next revision, which the compare-and-set refuses: the rows are locked, so overwrite them.
      await tx.overwriteLocked(republishes.map((c) => c.row));
      accepted.push(...republishes);
      for (const change of lost) {
        deps.onConflict?.();
        settled.set(change.row.taskId, { outcome: 'conflict' });
      }
      const published = await publishReplacements(tx, deps, accepted, now);
      for (const [taskId, outcome] of published) if (outcome.ok) publishedHere.push(taskId);
      for (const change of accepted) {
        const outcome = published.get(change.row.taskId)!;
        settled.set(
          change.row.taskId,
          outcome.ok ? { outcome: 'changed', revision: outcome.revision, state: change.state } : { outcome: 'bus_refused', error: outcome.error },
        );
      }
      const refused = ids.filter((taskId) => settled.get(taskId)!.outcome === 'bus_refused');
      // Still under the row locks: nobody saw these revisions. A refusal may still have reached the
      // stream (its acknowledgement lost), so these tasks publish the stored truth at their next projection.
      if (refused.length > 0) await tx.restore(refused.map((taskId) => ({ taskId, previous: stored.get(taskId) })));
      for (const taskId of refused) deps.busAhead?.add(taskId);
      if (store.capabilities.releasesSlotBeforeCommit) slot.release();
      return new Map(ids.map((taskId) => [taskId, settled.get(taskId)!])) as BatchProjection;
    })
    .catch((err: unknown) => {
      for (const taskId of publishedHere) deps.busAhead?.add(taskId);
      throw err;
    });
  for (const taskId of publishedHere) deps.busAhead?.delete(taskId);
  slot.release();
  return projected;
}

/**
 * Read: the tasks' stored summaries, locked first, then their authoritative pending states, so the
 * states are read after any concurrent projection of the same tasks committed.
 */
async function readTasks(tx: ProjectionTransaction, taskIds: readonly string[]) {
  const stored = await tx.readSummariesForUpdate(taskIds);
  const states = await tx.loadPendingStates(taskIds);
  return { stored, states };
}

type PendingChange = SummaryChange & { state: TaskPendingState };

/** Decide: each task is unknown, unchanged (settled now), or a change to write. */
function decideTasks(
  logger: Logger,
  now: string,
  taskIds: readonly string[],
  stored: ReadonlyMap<string, StoredStatusSummary>,
  states: ReadonlyMap<string, TaskPendingState>,
  busAhead: ReadonlySet<string> | undefined,
): { settled: Map<string, TaskProjection>; changes: PendingChange[]; republishes: PendingChange[] } {
  const settled = new Map<string, TaskProjection>();
  const changes: PendingChange[] = [];
  const republishes: PendingChange[] = [];
  for (const taskId of taskIds) {
    const state = states.get(taskId);
    if (!state) {
      settled.set(taskId, { outcome: 'unknown_task' });
      continue;
    }
    const decision = decideNextSummary(logger, now, stored.get(taskId), state);
    if (decision.outcome === 'changed') changes.push({ row: decision.row, update: decision.update, state });
    else if (!busAhead?.has(taskId)) settled.set(taskId, { outcome: 'unchanged', revision: decision.revision, state });
    else {
      const again = decideNextSummary(logger, now, stored.get(taskId), state, true);
      if (again.outcome === 'changed') republishes.push({ row: again.row, update: again.update, state });
    }
  }
  return { settled, changes, republishes };
}

/** Compare-and-set: every change in one statement; a change not accepted lost to a concurrent writer. */
async function compareAndSet(tx: ProjectionTransaction, changes: readonly PendingChange[]) {
  const written = await tx.compareAndSet(changes.map((c) => c.row));
  return { accepted: changes.filter((c) => written.has(c.row.taskId)), lost: changes.filter((c) => !written.has(c.row.taskId)) };
}

type Publication = { ok: true; revision: number } | { ok: false; error: unknown };

/**
 * Publish: every accepted replacement at once, under the row locks. A revision the stream already
 * holds (from an attempt that did not commit) moves on to the next, the stored row following it, up
 * to MAX_REVISION_BUMPS times. Resolves to each task's published revision or the bus's refusal.
 */
async function publishReplacements(
  tx: ProjectionTransaction,
  deps: ProjectTasksDeps,
  changes: readonly PendingChange[],
  now: string,
): Promise<Map<string, Publication>> {
  const outcomes = new Map<string, Publication>();
  let publishing = [...changes];
  for (let bumps = 0; publishing.length > 0; bumps++) {
    const published = await Promise.allSettled(publishing.map((c) => deps.publisher.publishSummary(c.update)));
    const duplicates: PendingChange[] = [];
    publishing.forEach((c, i) => {
      const outcome = published[i]!;
      const taskId = c.row.taskId;
      if (outcome.status === 'rejected') outcomes.set(taskId, { ok: false, error: outcome.reason });
      else if (outcome.value === 'published') outcomes.set(taskId, { ok: true, revision: c.row.revision });
      else if (bumps < MAX_REVISION_BUMPS) duplicates.push(c);
      else outcomes.set(taskId, { ok: false, error: new DuplicateRevisionsError(taskId, c.row.revision - bumps, c.row.revision) });
    });
    if (duplicates.length === 0) break;
    deps.logger.warn(
      { tasks: duplicates.map((c) => `${c.row.taskId}:${c.row.revision}`) },
      'the stream already held these revisions from an attempt that did not commit; publishing at the next revision',
    );
    publishing = duplicates.map((c) => atNextRevision(c, now));
    await tx.overwriteLocked(publishing.map((c) => c.row));
  }
  return outcomes;
}

/**
 * Runs `attempt` (one projection transaction) over the tasks, then again over those whose
 * compare-and-set lost, rereading them, until none lost or `maxAttempts` transactions ran: a task
 * still `conflict` in the result lost every time. A plain loop rather than p-retry: a lost
 * compare-and-set is a value for some tasks of a batch, not a thrown error, there is no delay
 * between attempts, and any error thrown must reach the caller at once.
 */
export async function rereadOnConflict(
  taskIds: readonly string[],
  attempt: (taskIds: readonly string[]) => Promise<BatchProjection>,
  logger: Logger,
  maxAttempts = MAX_CAS_ATTEMPTS,
): Promise<BatchProjection> {
  const projected: BatchProjection = new Map();
  let pending = [...new Set(taskIds)];
  for (let attempts = 1; ; attempts++) {
    const batch = await attempt(pending);
    for (const taskId of pending) projected.set(taskId, batch.get(taskId)!);
    pending = pending.filter((taskId) => batch.get(taskId)!.outcome === 'conflict');
    if (pending.length === 0 || attempts >= maxAttempts) return projected;
    logger.debug({ tasks: pending, attempt: attempts }, 'summary compare-and-set lost; rereading');
  }
}

/** A task's projection as its caller settles it: a refused publish, or a conflict after every attempt, is a failure. */
export function settleProjection(taskId: string, projection: TaskProjection, attempts = MAX_CAS_ATTEMPTS): PromiseSettledResult<ProjectionResult> {
  if (projection.outcome === 'bus_refused') return { status: 'rejected', reason: projection.error };
  if (projection.outcome === 'conflict') return { status: 'rejected', reason: new ConflictExhaustedError(taskId, attempts) };
  return { status: 'fulfilled', value: projection };
}

/**
 * One task's projection outside the scheduler (tools, benchmarks): a batch of one through the same
 * transaction and reread loop as the projector's. Rejects with ConflictExhaustedError after
 * MAX_CAS_ATTEMPTS lost compare-and-sets, or with the bus's error.
 */
export async function projectTask(deps: ProjectTasksDeps, taskId: string): Promise<ProjectionResult> {
  const projected = await rereadOnConflict([taskId], (ids) => projectTasks(deps, ids), deps.logger);
  const settled = settleProjection(taskId, projected.get(taskId)!);
  if (settled.status === 'rejected') throw settled.reason;
  return settled.value;
}
