import { KeyedCoalescer, NO_SLOT as NO_RUN_SLOT, type RunSlot } from '../background/keyedCoalescer.js';
import type { ProjectionCapacity } from './projectionCapacity.js';

/**
 * One of the scheduler's transaction slots, lent to a batch. `release()` gives it up for the next
 * batch while this one finishes (a COMMIT waiting on the disk, publishes after it); `take()` gets
 * one again before another transaction of the same batch (a reread after a lost compare-and-set, a
 * task projected alone after a failed batch), so every transaction of a batch holds a slot. The
 * batch's tasks still settle only when it is done; the scheduler releases the slot at the latest
 * then.
 */
export type TransactionSlot = RunSlot;

/** A slot that is no scheduler's: for projections run outside one (reconcile pages, tools). */
export const NO_SLOT: TransactionSlot = NO_RUN_SLOT;

/**
 * Projects distinct tasks in one go, settling each, in the order given. Called at once with a slot
 * of its own; never called twice at the same time for one task.
 */
type BatchRunner = (taskIds: readonly string[], slot: TransactionSlot) => Promise<Array<PromiseSettledResult<void>>>;

export interface ProjectionSchedulerOptions {
  capacity: ProjectionCapacity;
  runBatch: BatchRunner;
}

/**
 * When projections run: the keyed coalescer over task ids, with the projection capacity.
 *
 * - Per task, a dirty bit: at most one projection of a task in flight, and a message submitted for
 *   it is settled only by a projection that STARTED after it arrived, so acking it then is safe
 *   (that projection read state at least as new as the event). A burst of N events for a task
 *   costs a handful of projections, not N.
 * - Group commit: at most `capacity.transactions` transactions hold a slot at once. Idle, a task
 *   gets a transaction of its own at once, so nothing waits for company; while every slot is busy
 *   tasks wait, and the next free slot takes every waiting task (up to `capacity.batchSize`) into
 *   ONE transaction. Loaded, the per-transaction costs (the write lock, the commit, the bus round
 *   trips a projection holds its rows across) are shared, and a backlog left by a stall drains in a
 *   few transactions instead of one per task.
 *
 * At most `capacity.tasksInFlight` distinct tasks are admitted (waiting for a slot, in a batch, or
 * in a batch that gave its slot up); the others wait their turn in arrival order.
 */
export class ProjectionScheduler {
  private readonly runs: KeyedCoalescer<string>;

  constructor(options: ProjectionSchedulerOptions) {
    const { batchSize, transactions, tasksInFlight } = options.capacity;
    const run = async (taskIds: readonly string[], slot: TransactionSlot) => {
      const settled = await options.runBatch(taskIds, slot);
      const short = new Error(`batch settled ${settled.length} of ${taskIds.length} tasks`);
      return taskIds.map((_, i): PromiseSettledResult<void> => settled[i] ?? { status: 'rejected', reason: short });
    };
    this.runs = new KeyedCoalescer({ run, concurrency: transactions, batchSize, keysInFlight: tasksInFlight });
  }

  /** Tasks with queued or running work. */
  get activeTasks(): number {
    return this.runs.activeKeys;
  }

  /** Resolves once a projection of `taskId` that started after this call committed and published; rejects when it failed. */
  project(taskId: string): Promise<void> {
    return this.runs.schedule(taskId);
  }

  /** Resolves once nothing is queued or running (graceful shutdown). */
  whenIdle(): Promise<void> {
    return this.runs.whenIdle();
  }
}
