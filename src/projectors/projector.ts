import type { Logger } from 'pino';
import type { EventData } from '../events/envelope.js';
import type { Metrics } from '../metrics.js';
import type { RepositoryContext } from '../repository/context.js';
import type { PendingAction } from '../turns/pendingAction.js';
import { relevanceOf } from './eventRelevance.js';
import type { SessionPendingActionUpdate, SummaryPublisher } from './ports.js';
import { ProjectionBatcher } from './projectionBatcher.js';
import { projectTask, projectTasks, type BatchProjection, type ProjectionResult, type ProjectTaskDeps } from './projectTask.js';
import { TaskCoalescer } from './taskCoalescer.js';
import { taskIdOfSession } from '../repository/tasks.js';

export type EventOutcome = 'projected' | 'skipped' | 'unknown_type' | 'no_task';

type BatchOutcome = Pick<BatchProjection, 'conflicts' | 'failed'>;

export interface ProjectorOptions {
  ctx: RepositoryContext;
  publisher: SummaryPublisher;
  logger: Logger;
  metrics?: Metrics;
  /** Tasks one projection transaction takes at most; (`connections` + 1) x this many are in flight. */
  concurrency: number;
  /**
   * Projection transactions open at once on PostgreSQL (default 1, at most `connections`); tasks due
   * while all are busy share the next one. Always 1 on SQLite: its single writer would only queue the
   * others.
   */
  transactions?: number;
  /**
   * Database connections projections may hold at once (the PostgreSQL pool; SQLite: 1), default
   * `transactions`. A batch that released its slot still holds one until its COMMIT is done.
   */
  connections?: number;
  /** Epoch of this process's per-session pending-action revisions (allocated from kandev_meta). */
  epoch: string;
  /** Sessions whose last published pending action is remembered (bounds memory). */
  sessionCacheSize?: number;
}

/**
 * The projection service: turns "task X may be stale" signals into coalesced, level-triggered
 * projections, and publishes per-session pending-action changes after each one.
 */
export class Projector {
  private readonly coalescer: TaskCoalescer;
  private readonly lastSessionAction = new Map<string, PendingAction | null>();
  private sequence = 0;
  private readonly log: Logger;

  constructor(private readonly options: ProjectorOptions) {
    this.log = options.logger.child({ component: 'projector' });
    const transactions = options.ctx.dialect.name === 'sqlite' ? 1 : (options.transactions ?? 1);
    const maxBatches = Math.max(1, Math.min(transactions, options.connections ?? transactions, options.concurrency));
    const batcher = new ProjectionBatcher({
      maxBatches,
      maxBatchSize: options.concurrency,
      runBatch: (taskIds, release) => this.projectLive(taskIds, release),
    });
    // Tasks in flight: a full batch for every connection (a slot's, or a COMMIT's after the slot was
    // released) plus one batch past COMMIT publishing its session changes. Counting only the slots'
    // batches, a COMMIT stuck on a slow WAL flush held back every task due behind it, as if it still
    // held its slot, and the worker benchmark's (2) ran about a third slower.
    const connections = Math.max(maxBatches, options.connections ?? maxBatches);
    this.coalescer = new TaskCoalescer({ concurrency: (connections + 1) * options.concurrency, project: (taskId) => batcher.project(taskId) });
  }

  /**
   * Handles one inbound event; resolves once a projection that started after it has committed and
   * published (or at once when the event cannot change pending state). Rejects when that projection
   * failed, so the caller can retry or dead-letter the event.
   */
  async handleEvent(eventType: string, data: EventData): Promise<EventOutcome> {
    const relevance = relevanceOf(eventType, data);
    if (relevance !== 'project') return relevance === 'skip' ? 'skipped' : 'unknown_type';
    const taskId = data.task_id ?? (data.session_id ? await taskIdOfSession(this.options.ctx, data.session_id) : undefined);
    if (!taskId) return 'no_task';
    await this.coalescer.run(taskId);
    return 'projected';
  }

  /** Projects one task through the coalescer (reconcile, replay and services use this). */
  reproject(taskId: string): Promise<void> {
    return this.coalescer.run(taskId);
  }

  /**
   * Projects many tasks in one transaction (reconcile pages), then any whose first insert raced a
   * concurrent projection, or whose publish failed, one by one through the coalescer. Resolves to
   * the ids that failed.
   */
  async reprojectBatch(taskIds: readonly string[]): Promise<string[]> {
    if (taskIds.length === 0) return [];
    const batch = await this.projectTogether(taskIds);
    const retry = batch ? [...batch.conflicts, ...batch.failed.keys()] : [...taskIds];
    const settled = await Promise.allSettled(retry.map((taskId) => this.reproject(taskId)));
    return retry.filter((_, i) => settled[i]!.status === 'rejected');
  }

  get activeTasks(): number {
    return this.coalescer.activeTasks;
  }

  whenIdle(): Promise<void> {
    return this.coalescer.whenIdle();
  }

  /**
   * The coalescer's tasks, grouped by the batcher: one alone takes the single-task path; several share
   * one transaction. A task whose publish the bus refused fails alone (the others committed). Tasks
   * the transaction could not settle (it failed, a first insert raced, or the session publish failed
   * after commit) get a projection of their own, so a task that breaks the shared statements fails
   * alone too. Not through the coalescer: these tasks are already in flight there.
   */
  private async projectLive(taskIds: readonly string[], release: () => void): Promise<Array<PromiseSettledResult<void>>> {
    if (taskIds.length === 1) return Promise.allSettled([this.projectOnce(taskIds[0]!, release)]);
    let batch: BatchOutcome | undefined;
    try {
      batch = await this.projectTogether(taskIds, release);
    } catch (err) {
      this.log.warn({ err, tasks: taskIds.length }, 'publishing session pending actions failed; projecting the tasks one by one');
    }
    const again = new Set(batch ? batch.conflicts : taskIds);
    return Promise.allSettled(
      taskIds.map((taskId) => {
        if (again.has(taskId)) return this.projectOnce(taskId);
        if (batch?.failed.has(taskId)) return Promise.reject(batch.failed.get(taskId));
        return Promise.resolve();
      }),
    );
  }

  /**
   * `projectTasks` with metrics and the session publishes. Resolves to the tasks whose first insert
   * raced another projection and those whose publish failed (not stored), or undefined when the
   * transaction failed (logged; nothing committed). Rejects when the session publish fails after
   * commit.
   */
  private async projectTogether(taskIds: readonly string[], release?: () => void): Promise<BatchOutcome | undefined> {
    const { metrics } = this.options;
    // Reserved before the read, as Kandev does (see projectOnce).
    const sequence = ++this.sequence;
    metrics?.projectionBatchTasks.observe(taskIds.length);
    const stop = metrics?.projectionSeconds.startTimer();
    let batch;
    try {
      batch = await projectTasks(this.projectionDeps(release), taskIds);
      release?.();
    } catch (err) {
      metrics?.projections.inc({ result: 'failed' }, taskIds.length);
      this.log.warn({ err, tasks: taskIds.length }, 'batched projection failed; projecting the tasks one by one');
      return undefined;
    } finally {
      stop?.();
    }
    if (batch.failed.size > 0) {
      metrics?.projections.inc({ result: 'failed' }, batch.failed.size);
      this.log.warn({ tasks: [...batch.failed.keys()], err: [...batch.failed.values()][0] }, 'the bus refused some summaries of a batch; their rows were put back');
    }
    const sessions: Array<{ sessionId: string; taskId: string; pendingAction: PendingAction | null }> = [];
    for (const [taskId, result] of batch.results) {
      metrics?.projections.inc({ result: result.outcome });
      if (result.outcome !== 'unknown_task') {
        for (const s of result.state.sessions) sessions.push({ sessionId: s.sessionId, taskId, pendingAction: s.pendingAction });
      }
    }
    await this.publishSessionChanges(sessions, sequence);
    return { conflicts: batch.conflicts, failed: batch.failed };
  }

  private async projectOnce(taskId: string, release?: () => void): Promise<void> {
    const { metrics } = this.options;
    // Reserved before the read, as Kandev does: a read delayed behind a newer one carries the
    // older sequence and clients discard it.
    const sequence = ++this.sequence;
    metrics?.projectionBatchTasks.observe(1);
    const stop = metrics?.projectionSeconds.startTimer();
    let result: ProjectionResult;
    try {
      result = await projectTask(this.projectionDeps(release), taskId);
      release?.();
    } catch (err) {
      metrics?.projections.inc({ result: 'failed' });
      throw err;
    } finally {
      stop?.();
    }
    metrics?.projections.inc({ result: result.outcome });
    if (result.outcome === 'changed') this.log.debug({ taskId, revision: result.revision }, 'summary projected');
    if (result.outcome === 'unknown_task') return;
    await this.publishSessionChanges(
      result.state.sessions.map((s) => ({ sessionId: s.sessionId, taskId, pendingAction: s.pendingAction })),
      sequence,
    );
  }

  /**
   * What a projection transaction needs, releasing its batcher slot (if any) once only COMMIT is left
   * on PostgreSQL, where the next batch's transaction runs on another connection beside a COMMIT
   * waiting for the WAL flush. SQLite's one connection stays with the committing transaction, so
   * there the slot is released after COMMIT (by the caller), still before the session publish.
   */
  private projectionDeps(release: (() => void) | undefined): ProjectTaskDeps {
    const { metrics } = this.options;
    return {
      ctx: this.options.ctx,
      publisher: this.options.publisher,
      logger: this.log,
      onConflict: () => metrics?.casConflicts.inc(),
      beforeCommit: this.options.ctx.dialect.name === 'postgres' ? release : undefined,
    };
  }

  private async publishSessionChanges(
    sessions: Array<{ sessionId: string; taskId: string; pendingAction: PendingAction | null }>,
    sequence: number,
  ): Promise<void> {
    const updates: SessionPendingActionUpdate[] = [];
    for (const s of sessions) {
      if (this.lastSessionAction.has(s.sessionId) && this.lastSessionAction.get(s.sessionId) === s.pendingAction) continue;
      updates.push({ ...s, revision: { epoch: this.options.epoch, sequence } });
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
