import type { ProjectionCapacity } from './projectionCapacity.js';

/**
 * One of the scheduler's transaction slots, lent to a batch. `release()` gives it up for the next
 * batch while this one finishes (a COMMIT waiting on the disk, publishes after it); the batch's
 * tasks still settle only when it is done. Idempotent; the scheduler releases it at the latest
 * when the batch settles.
 */
export interface TransactionSlot {
  release(): void;
}

/** A slot that is no scheduler's: for projections run outside one (reconcile pages, tools). */
export const NO_SLOT: TransactionSlot = { release: () => undefined };

/**
 * Projects distinct tasks in one go, settling each, in the order given. Called at once with a slot
 * of its own; never called twice at the same time for one task.
 */
export type BatchRunner = (taskIds: readonly string[], slot: TransactionSlot) => Promise<Array<PromiseSettledResult<void>>>;

export interface ProjectionSchedulerOptions {
  capacity: ProjectionCapacity;
  runBatch: BatchRunner;
}

interface Waiter {
  resolve(): void;
  reject(error: unknown): void;
}

interface TaskState {
  /** A batch holding this task has started and not settled. */
  inFlight: boolean;
  /** Messages that arrived since that batch started (the dirty bit: not empty). */
  queued: Waiter[];
}

/**
 * When projections run. Two rules:
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
  private readonly tasks = new Map<string, TaskState>();
  /** Tasks with messages, waiting for a place in flight. */
  private readonly dirty: string[] = [];
  /** Tasks in flight, waiting for a transaction slot. */
  private readonly waitingForSlot: string[] = [];
  private tasksInFlight = 0;
  private slotsTaken = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly options: ProjectionSchedulerOptions) {
    const { batchSize, transactions, tasksInFlight } = options.capacity;
    if (!(batchSize >= 1) || !(transactions >= 1) || !(tasksInFlight >= 1)) throw new RangeError('batch size, transactions and tasks in flight must be at least 1');
  }

  /** Tasks with queued or running work. */
  get activeTasks(): number {
    return this.tasks.size;
  }

  /** Resolves once a projection of `taskId` that started after this call committed and published; rejects when it failed. */
  project(taskId: string): Promise<void> {
    return new Promise((resolve, reject) => {
      let task = this.tasks.get(taskId);
      if (!task) {
        task = { inFlight: false, queued: [] };
        this.tasks.set(taskId, task);
      }
      task.queued.push({ resolve, reject });
      // Already dirty (queued, or due to rerun after its batch): this message rides along.
      if (!task.inFlight && task.queued.length === 1) {
        this.dirty.push(taskId);
        this.pump();
      }
    });
  }

  /** Resolves once nothing is queued or running (graceful shutdown). */
  whenIdle(): Promise<void> {
    if (this.tasks.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    const { batchSize, transactions, tasksInFlight } = this.options.capacity;
    while (this.tasksInFlight < tasksInFlight && this.dirty.length > 0) {
      this.tasksInFlight++;
      this.waitingForSlot.push(this.dirty.shift()!);
    }
    while (this.slotsTaken < transactions && this.waitingForSlot.length > 0) {
      const batch = this.waitingForSlot.splice(0, batchSize);
      this.slotsTaken++;
      void this.run(batch);
    }
  }

  private async run(taskIds: string[]): Promise<void> {
    // The messages this batch covers: those that arrived before it started.
    const covered = taskIds.map((taskId) => {
      const task = this.tasks.get(taskId)!;
      task.inFlight = true;
      const waiters = task.queued;
      task.queued = [];
      return waiters;
    });
    let released = false;
    const slot: TransactionSlot = {
      release: () => {
        if (released) return;
        released = true;
        this.slotsTaken--;
        this.pump();
      },
    };
    let settled: Array<PromiseSettledResult<void>>;
    try {
      settled = await this.options.runBatch(taskIds, slot);
    } catch (error) {
      settled = taskIds.map(() => ({ status: 'rejected', reason: error }));
    }
    slot.release();
    taskIds.forEach((taskId, i) => {
      const outcome = settled[i] ?? { status: 'rejected', reason: new Error(`batch settled ${settled.length} of ${taskIds.length} tasks`) };
      for (const waiter of covered[i]!) {
        if (outcome.status === 'fulfilled') waiter.resolve();
        else waiter.reject(outcome.reason);
      }
      const task = this.tasks.get(taskId)!;
      task.inFlight = false;
      this.tasksInFlight--;
      if (task.queued.length > 0) this.dirty.push(taskId);
      else this.tasks.delete(taskId);
    });
    this.pump();
    if (this.tasks.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }
}
