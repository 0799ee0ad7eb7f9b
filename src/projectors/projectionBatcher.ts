/**
 * Group commit for projections. At most `maxBatches` projection transactions run at once; a task
 * submitted while they are all busy waits, and the next free slot takes every waiting task (up to
 * `maxBatchSize`) into ONE transaction. Idle, each task gets a transaction of its own at once, so
 * nothing waits for company; loaded, the per-transaction costs (the lock, the commit, the bus round
 * trips a projection holds its rows across) are shared, and a backlog left by a stall drains in a
 * few transactions instead of one per task. SQLite's single writer is where it matters most: every
 * projection there queues behind the one holding the write lock.
 */

export interface ProjectionBatcherOptions {
  /**
   * Projects distinct tasks in one go; settles per task, in the order given. May call `release` once
   * the batch no longer needs its slot: the rest of its work (a COMMIT waiting on the disk, publishes
   * after it) then runs beside the next batch, and its tasks still settle only when it is done.
   */
  runBatch(taskIds: readonly string[], release: () => void): Promise<Array<PromiseSettledResult<void>>>;
  /** Batches in flight at once (the writers the database offers). */
  maxBatches: number;
  /** Tasks per batch. */
  maxBatchSize: number;
}

interface Request {
  taskId: string;
  resolve(): void;
  reject(error: unknown): void;
}

export class ProjectionBatcher {
  private waiting: Request[] = [];
  private running = 0;

  constructor(private readonly options: ProjectionBatcherOptions) {
    if (!(options.maxBatches >= 1) || !(options.maxBatchSize >= 1)) throw new RangeError('maxBatches and maxBatchSize must be at least 1');
  }

  /** Resolves once a batch holding `taskId` settled it. The caller keeps one request per task in flight. */
  project(taskId: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ taskId, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.running < this.options.maxBatches && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.options.maxBatchSize);
      this.running++;
      void this.run(batch);
    }
  }

  private async run(batch: Request[]): Promise<void> {
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.running--;
      this.pump();
    };
    try {
      const settled = await this.options.runBatch(batch.map((r) => r.taskId), release);
      batch.forEach((request, i) => {
        const outcome = settled[i];
        if (outcome?.status === 'fulfilled') request.resolve();
        else request.reject(outcome ? outcome.reason : new Error(`batch settled ${settled.length} of ${batch.length} tasks`));
      });
    } catch (error) {
      for (const request of batch) request.reject(error);
    } finally {
      release();
    }
  }
}
