import type { Logger } from 'pino';
import type { EventData } from '../contract/envelope.js';
import type { Metrics } from '../metrics.js';
import type { ProjectionStore } from '../repository/projection/projectionStore.js';
import type { PendingAction } from '../turns/pendingAction.js';
import { relevanceOf } from './eventRelevance.js';
import { createForeignWriteWatch } from './foreignSummaryWrites.js';
import type { SessionPendingActionUpdate, SummaryPublisher } from './ports.js';
import type { ProjectionCapacity } from './projectionCapacity.js';
import { NO_SLOT, ProjectionScheduler, type TransactionSlot } from './projectionScheduler.js';
import { projectTasks, rereadOnConflict, settleProjection, type BatchProjection, type ProjectTasksDeps } from './projectTasks.js';

export type EventOutcome = 'projected' | 'skipped' | 'unknown_type' | 'no_task';

export interface ProjectorOptions {
  store: ProjectionStore;
  publisher: SummaryPublisher;
  logger: Logger;
  metrics?: Metrics;
  /** The scheduler's limits (`projectionCapacity`, computed where the worker is assembled). */
  capacity: ProjectionCapacity;
  /** Epoch of this process's per-session pending-action revisions (allocated from kandev_meta). */
  epoch: string;
  /** Sessions whose last published pending action is remembered (bounds memory). */
  sessionCacheSize?: number;
  /** Wait before this process projects again a task whose publish it saw refused (default 2 s). */
  republishAfterMs?: number;
}

/**
 * The projection service: turns "task X may be stale" signals into scheduled, level-triggered
 * projections, and publishes per-session pending-action changes after each one.
 */
export class Projector {
  private readonly scheduler: ProjectionScheduler;
  private readonly lastSessionAction = new Map<string, PendingAction | null>();
  private sequence = 0;
  private readonly log: Logger;
  private readonly deps: ProjectTasksDeps;
  /** Tasks whose stream may hold a revision their row does not (projectTasks keeps it). */
  private readonly aheadOnStream = new Set<string>();
  private readonly republishTimers = new Map<string, NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly options: ProjectorOptions) {
    this.log = options.logger.child({ component: 'projector' });
    this.deps = {
      store: options.store,
      publisher: options.publisher,
      logger: this.log,
      onConflict: () => options.metrics?.casConflicts.inc(),
      foreignWrites: createForeignWriteWatch({ logger: this.log, onFound: (field) => options.metrics?.foreignSummaryWrites.inc({ field }) }),
      aheadOnStream: this.aheadOnStream,
    };
    this.scheduler = new ProjectionScheduler({ capacity: options.capacity, runBatch: (taskIds, slot) => this.runBatch(taskIds, slot) });
  }

  /**
   * Handles one inbound event; resolves once a projection that started after it has committed and
   * published (or at once when the event cannot change pending state). Rejects when that projection
   * failed, so the caller can retry or dead-letter the event.
   *
   * A redelivered event was taken by a replica that never acknowledged it: maybe one killed between
   * its projection's publish and COMMIT, whose summary is then on the stream a revision ahead of the
   * row, and which took its memory of that (`aheadOnStream`) with it. The task is treated as ahead
   * here, so the stored summary is published again if nothing changed; a first delivery costs nothing.
   */
  async handleEvent(eventType: string, data: EventData, delivery?: { redelivered: boolean }): Promise<EventOutcome> {
    const relevance = relevanceOf(eventType, data);
    if (relevance !== 'project') return relevance === 'skip' ? 'skipped' : 'unknown_type';
    const taskId = data.task_id ?? (data.session_id ? await this.options.store.taskIdOfSession(data.session_id) : undefined);
    if (!taskId) return 'no_task';
    if (delivery?.redelivered) this.aheadOnStream.add(taskId);
    await this.scheduler.project(taskId);
    return 'projected';
  }

  /** Projects one task through the scheduler (reconcile, replay and services use this). */
  reproject(taskId: string): Promise<void> {
    return this.scheduler.project(taskId);
  }

  /**
   * Projects many tasks in one transaction (reconcile pages, larger than a batch), then any whose
   * compare-and-set lost, or whose publish failed, one by one through the scheduler. Resolves to the
   * ids that failed; rejects when the session publish after the shared commit failed.
   */
  async reprojectBatch(taskIds: readonly string[]): Promise<string[]> {
    if (taskIds.length === 0) return [];
    let transaction: { batch: BatchProjection; sequence: number } | undefined;
    try {
      transaction = await this.transact(taskIds, NO_SLOT);
    } catch (err) {
      this.log.warn({ err, tasks: taskIds.length }, 'batched projection failed; projecting the tasks one by one');
    }
    let retry = [...taskIds];
    if (transaction) {
      await this.publishSessionChanges(transaction.batch, transaction.sequence);
      const refused = [...transaction.batch].flatMap(([taskId, p]) => (p.outcome === 'bus_refused' ? [{ taskId, err: p.error }] : []));
      if (refused.length > 0) {
        this.log.warn(
          { tasks: refused.map((r) => r.taskId), err: refused[0]!.err },
          'the bus refused some summaries of a batch; their rows were put back; projecting them one by one',
        );
      }
      retry = [...transaction.batch].filter(([, p]) => p.outcome === 'conflict' || p.outcome === 'bus_refused').map(([taskId]) => taskId);
    }
    const settled = await Promise.allSettled(retry.map((taskId) => this.reproject(taskId)));
    return retry.filter((_, i) => settled[i]!.status === 'rejected');
  }

  get activeTasks(): number {
    return this.scheduler.activeTasks;
  }

  whenIdle(): Promise<void> {
    return this.scheduler.whenIdle();
  }

  /** Cancels the pending republishes (shutdown); projections in flight finish. Idempotent. */
  stopRepublishing(): void {
    this.stopped = true;
    for (const timer of this.republishTimers.values()) clearTimeout(timer);
    this.republishTimers.clear();
  }

  /**
   * Projects the task again after a while, here, until it no longer may be ahead on the stream: the
   * event that caused the refused projection is redelivered, but maybe to another replica, which
   * does not know that this one's attempt may have reached the stream and would find nothing to
   * publish. A process that dies first loses this; the events it never acknowledged come back as
   * redeliveries, which `handleEvent` treats the same way.
   */
  private republishLater(taskId: string): void {
    if (this.stopped || this.republishTimers.has(taskId)) return;
    const timer = setTimeout(() => {
      this.republishTimers.delete(taskId);
      if (this.stopped || !this.aheadOnStream.has(taskId)) return;
      // A failure leaves the task marked, and its runBatch schedules the next attempt.
      this.reproject(taskId).catch(() => undefined);
    }, this.options.republishAfterMs ?? 2000);
    timer.unref();
    this.republishTimers.set(taskId, timer);
  }

  /**
   * The scheduler's batch runner; a single task is a batch of one. Tasks whose compare-and-set lost
   * are reread together, up to MAX_CAS_ATTEMPTS transactions. When a shared transaction, or the
   * session publish after it, fails, every task of the batch gets a projection of its own, so a task
   * that breaks the shared statements fails alone. Every one of these transactions holds the batch's
   * slot (taken again after a transaction gave it up), so none runs beyond the scheduler's
   * transactions; the tasks projected alone go one after the other, not through the scheduler:
   * they are already in flight there.
   */
  private async runBatch(taskIds: readonly string[], slot: TransactionSlot): Promise<Array<PromiseSettledResult<void>>> {
    try {
      return await this.runBatchOnce(taskIds, slot);
    } finally {
      for (const taskId of taskIds) if (this.aheadOnStream.has(taskId)) this.republishLater(taskId);
    }
  }

  private async runBatchOnce(taskIds: readonly string[], slot: TransactionSlot): Promise<Array<PromiseSettledResult<void>>> {
    let projected: BatchProjection;
    try {
      projected = await rereadOnConflict(taskIds, (ids) => this.attempt(ids, slot), this.log);
    } catch (err) {
      if (taskIds.length === 1) return [{ status: 'rejected', reason: err }];
      this.log.warn({ err, tasks: taskIds.length }, 'a shared projection failed; projecting its tasks one by one');
      const alone: Array<PromiseSettledResult<void>> = [];
      for (const taskId of taskIds) alone.push(...(await this.runBatchOnce([taskId], slot)));
      return alone;
    }
    return taskIds.map((taskId) => {
      const settled = settleProjection(taskId, projected.get(taskId)!);
      if (settled.status === 'rejected') {
        // A refused publish was counted with its transaction; a conflict on every attempt is counted here.
        if (projected.get(taskId)!.outcome === 'conflict') this.options.metrics?.projections.inc({ result: 'failed' });
        return settled;
      }
      if (settled.value.outcome === 'changed') this.log.debug({ taskId, revision: settled.value.revision }, 'summary projected');
      return { status: 'fulfilled', value: undefined };
    });
  }

  /** One projection transaction under a slot, then the session publish of what it read. */
  private async attempt(taskIds: readonly string[], slot: TransactionSlot): Promise<BatchProjection> {
    await slot.take();
    const { batch, sequence } = await this.transact(taskIds, slot);
    await this.publishSessionChanges(batch, sequence);
    return batch;
  }

  /** `projectTasks` with its metrics. */
  private async transact(taskIds: readonly string[], slot: TransactionSlot): Promise<{ batch: BatchProjection; sequence: number }> {
    const { metrics } = this.options;
    // Reserved before the read, as Kandev does: a read delayed behind a newer one carries the older
    // sequence and clients discard it.
    const sequence = ++this.sequence;
    metrics?.projectionBatchTasks.observe(taskIds.length);
    const stop = metrics?.projectionSeconds.startTimer();
    let batch: BatchProjection;
    try {
      batch = await projectTasks(this.deps, taskIds, slot);
    } catch (err) {
      metrics?.projections.inc({ result: 'failed' }, taskIds.length);
      throw err;
    } finally {
      stop?.();
    }
    for (const projection of batch.values()) {
      // A conflict is counted by casConflicts, and as a projection once its reread settles.
      if (projection.outcome !== 'conflict') metrics?.projections.inc({ result: projection.outcome === 'bus_refused' ? 'failed' : projection.outcome });
    }
    return { batch, sequence };
  }

  private async publishSessionChanges(batch: BatchProjection, sequence: number): Promise<void> {
    const updates: SessionPendingActionUpdate[] = [];
    for (const [taskId, projection] of batch) {
      if (projection.outcome !== 'changed' && projection.outcome !== 'unchanged') continue;
      for (const s of projection.state.sessions) {
        if (this.lastSessionAction.has(s.sessionId) && this.lastSessionAction.get(s.sessionId) === s.pendingAction) continue;
        updates.push({
          sessionId: s.sessionId,
          taskId,
          workspaceId: projection.state.workspaceId,
          pendingAction: s.pendingAction,
          revision: { epoch: this.options.epoch, sequence },
        });
      }
    }
    if (updates.length === 0) return;
    await this.options.publisher.publishSessionPendingActions(updates);
    const limit = this.options.sessionCacheSize ?? 100_000;
    for (const u of updates) {
      this.lastSessionAction.delete(u.sessionId);
      this.lastSessionAction.set(u.sessionId, u.pendingAction);
      if (this.lastSessionAction.size > limit) this.lastSessionAction.delete(this.lastSessionAction.keys().next().value!);
    }
  }
}
