/**
 * Per-task coalescing: at most one projection in flight per task, plus a dirty bit. Every message
 * submitted for a task is settled only by a projection that STARTED after it arrived, so acking it
 * then is safe: that projection read state at least as new as the event. A burst of N events for a
 * task costs a handful of projections, not N.
 */

export interface Waiter {
  /** The projection covering this message committed and published. */
  resolve(): void;
  /** It failed; the message decides between retry and dead letter. */
  reject(error: unknown): void;
}

interface TaskSlot {
  inFlight: boolean;
  queued: Waiter[];
}

export interface TaskCoalescerOptions {
  /** Runs one projection of a task. */
  project(taskId: string): Promise<void>;
  /** Distinct tasks projected at once. */
  concurrency: number;
}

export class TaskCoalescer {
  private readonly slots = new Map<string, TaskSlot>();
  private readonly ready: string[] = [];
  private running = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly options: TaskCoalescerOptions) {}

  /** Number of tasks with queued or running work. */
  get activeTasks(): number {
    return this.slots.size;
  }

  submit(taskId: string, waiter: Waiter): void {
    let slot = this.slots.get(taskId);
    if (!slot) {
      slot = { inFlight: false, queued: [] };
      this.slots.set(taskId, slot);
    }
    const wasEmpty = slot.queued.length === 0;
    slot.queued.push(waiter);
    if (!slot.inFlight && wasEmpty) {
      this.ready.push(taskId);
      this.pump();
    }
  }

  /** Convenience: a promise settled like a waiter. */
  run(taskId: string): Promise<void> {
    return new Promise((resolve, reject) => this.submit(taskId, { resolve, reject }));
  }

  /** Resolves once nothing is queued or running (graceful shutdown). */
  whenIdle(): Promise<void> {
    if (this.slots.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running < this.options.concurrency && this.ready.length > 0) {
      const taskId = this.ready.shift()!;
      const slot = this.slots.get(taskId);
      if (!slot || slot.inFlight || slot.queued.length === 0) continue;
      this.running++;
      void this.runSlot(taskId, slot);
    }
  }

  private async runSlot(taskId: string, slot: TaskSlot): Promise<void> {
    slot.inFlight = true;
    const batch = slot.queued;
    slot.queued = [];
    try {
      await this.options.project(taskId);
      for (const w of batch) w.resolve();
    } catch (error) {
      for (const w of batch) w.reject(error);
    } finally {
      slot.inFlight = false;
      this.running--;
      if (slot.queued.length > 0) this.ready.push(taskId);
      else this.slots.delete(taskId);
      this.pump();
      if (this.slots.size === 0) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const resolve of waiters) resolve();
      }
    }
  }
}
