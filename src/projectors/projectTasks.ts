import type { Logger } from 'pino';
import { ConflictExhaustedError, DuplicateRevisionsError } from '../errors.js';
import type { ProjectionStore, ProjectionTransaction, StoredStatusSummary, TaskPendingState } from '../repository/projection/projectionStore.js';
import { atNextRevision, decideNextSummary, type SummaryChange } from './decideNextSummary.js';
import { findForeignWrite, ownedFieldsText, type ForeignWriteFinding, type ForeignWriteWatch } from './foreignSummaryWrites.js';
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
  /** Told of every summary row found written by another writer (foreignSummaryWrites.ts), once its transaction committed. */
  foreignWrites?: ForeignWriteWatch;
  /**
   * Tasks whose last projection here may have left the summary stream a revision ahead of their
   * row (see projectTasks); kept up to date by projectTasks, which republishes each at its next
   * projection even when nothing changed. Omitted: none is tracked.
   */
  aheadOnStream?: Set<string>;
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
  const ahead = deps.aheadOnStream;
  // Whose publish went out in this transaction: if it throws (the COMMIT failed), the stream may
  // hold their revisions while their rows do not.
  let attempted: readonly string[] = [];
  const { projected, foreign } = await store
    .withTransaction(async (tx) => {
      const ids = [...new Set(taskIds)];
      const { stored, states } = await readTasks(tx, ids);
      const now = tx.now();
      const { settled, changes } = decideTasks(deps.logger, now, ids, stored, states, ahead);
      const foreign = await detectForeignWrites(tx, stored, changes);
      const { accepted, lost } = await compareAndSet(tx, changes);
      attempted = accepted.map((c) => c.row.taskId);
      for (const change of lost) {
        deps.onConflict?.();
        settled.set(change.row.taskId, { outcome: 'conflict' });
      }
      const published = await publishReplacements(tx, deps, accepted, now);
      for (const change of accepted) {
        const outcome = published.get(change.row.taskId)!;
        settled.set(
          change.row.taskId,
          outcome.ok ? { outcome: 'changed', revision: outcome.revision, state: change.state } : { outcome: 'bus_refused', error: outcome.error },
        );
      }
      await recordWrites(tx, accepted, published);
      const refused = ids.filter((taskId) => settled.get(taskId)!.outcome === 'bus_refused');
      // Still under the row locks: nobody saw these revisions.
      if (refused.length > 0) await tx.restore(refused.map((taskId) => ({ taskId, previous: stored.get(taskId) })));
      if (store.capabilities.releasesSlotBeforeCommit) slot.release();
      return { projected: new Map(ids.map((taskId) => [taskId, settled.get(taskId)!])) as BatchProjection, foreign };
    })
    .catch((err: unknown) => {
      for (const taskId of attempted) ahead?.add(taskId);
      throw err;
    });
  slot.release();
  for (const finding of foreign) deps.foreignWrites?.observe(finding);
  if (ahead) {
    for (const [taskId, projection] of projected) {
      // A refused publish may have reached the stream all the same (its ack was lost, or the KV put
      // after it failed) while the row was put back: if the truth then returns to what the row says,
      // no semantic change would ever publish again, and the stream's last word would stay that
      // attempt's. The next projection republishes at the next revision instead.
      if (projection.outcome === 'bus_refused') ahead.add(taskId);
      else if (projection.outcome === 'changed' || projection.outcome === 'unknown_task') ahead.delete(taskId);
    }
  }
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

/**
 * The rows about to be rewritten that another writer wrote, recorded for `doctor`. Only those can hold one (a task left
 * unchanged holds the derivation already), so only their records are read: a projection that
 * changes nothing costs no extra statement. Read under the row locks, so a replica's record that
 * committed with its row is seen.
 */
async function detectForeignWrites(
  tx: ProjectionTransaction,
  stored: ReadonlyMap<string, StoredStatusSummary>,
  changes: readonly PendingChange[],
): Promise<ForeignWriteFinding[]> {
  const rewritten = changes.filter((c) => stored.has(c.row.taskId));
  if (rewritten.length === 0) return [];
  const records = await tx.readSummaryWrites(rewritten.map((c) => c.row.taskId));
  const found = rewritten.flatMap((c) => findForeignWrite(stored.get(c.row.taskId), records.get(c.row.taskId), c.row.summary) ?? []);
  if (found.length > 0)
    await tx.recordForeignSummaryWrites(found.map((f) => ({ taskId: f.taskId, revision: f.revision, fields: f.changes.map((c) => c.field) })));
  return found;
}

/** What this transaction wrote and published, recorded as this service's (a refused task's row is put back, so it is left out). */
async function recordWrites(tx: ProjectionTransaction, accepted: readonly PendingChange[], published: ReadonlyMap<string, Publication>) {
  const writes = accepted.flatMap((c) => {
    const outcome = published.get(c.row.taskId)!;
    return outcome.ok ? [{ taskId: c.row.taskId, revision: outcome.revision, ownedFields: ownedFieldsText(c.row.summary) }] : [];
  });
  if (writes.length > 0) await tx.recordSummaryWrites(writes);
}

/** `republish`: no semantic change, published again because the stream may be ahead of the row. */
type PendingChange = SummaryChange & { state: TaskPendingState; republish?: boolean };

/** Decide: each task is unknown, unchanged (settled now), or a change to write. */
function decideTasks(
  logger: Logger,
  now: string,
  taskIds: readonly string[],
  stored: ReadonlyMap<string, StoredStatusSummary>,
  states: ReadonlyMap<string, TaskPendingState>,
  aheadOnStream: ReadonlySet<string> | undefined,
): { settled: Map<string, TaskProjection>; changes: PendingChange[] } {
  const settled = new Map<string, TaskProjection>();
  const changes: PendingChange[] = [];
  for (const taskId of taskIds) {
    const state = states.get(taskId);
    if (!state) {
      settled.set(taskId, { outcome: 'unknown_task' });
      continue;
    }
    let decision = decideNextSummary(logger, now, stored.get(taskId), state);
    let republish = false;
    if (decision.outcome === 'unchanged' && aheadOnStream?.has(taskId)) {
      decision = decideNextSummary(logger, now, stored.get(taskId), state, true);
      republish = true;
    }
    if (decision.outcome === 'unchanged') settled.set(taskId, { outcome: 'unchanged', revision: decision.revision, state });
    else changes.push({ row: decision.row, update: decision.update, state, republish });
  }
  return { settled, changes };
}

/**
 * Compare-and-set: every change in one statement; a change not accepted lost to a concurrent writer.
 * A republish carries the stored summary itself, which the compare-and-set refuses as no change: its
 * row, locked since the read, is overwritten at the next revision instead.
 */
async function compareAndSet(tx: ProjectionTransaction, changes: readonly PendingChange[]) {
  const republished = changes.filter((c) => c.republish);
  const compared = changes.filter((c) => !c.republish);
  const written = await tx.compareAndSet(compared.map((c) => c.row));
  if (republished.length > 0) await tx.overwriteLocked(republished.map((c) => c.row));
  return {
    accepted: [...compared.filter((c) => written.has(c.row.taskId)), ...republished],
    lost: compared.filter((c) => !written.has(c.row.taskId)),
  };
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
