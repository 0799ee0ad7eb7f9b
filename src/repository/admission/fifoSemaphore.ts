/**
 * A counting semaphore that grants permits in arrival order and never hands one to a caller that
 * arrives while others wait (no barging), so a steady stream of newcomers cannot starve a waiter.
 * A wait is bounded by a deadline on `performance.now()`; a waiter whose deadline passes leaves the
 * queue holding nothing.
 */
export class FifoSemaphore {
  private available: number;
  private readonly waiters: Array<(granted: boolean) => void> = [];

  constructor(readonly capacity: number) {
    this.available = capacity;
  }

  /** Resolves true holding one permit, or false (holding none) if `deadline` passed first. */
  acquire(deadline: number): Promise<boolean> {
    if (this.available > 0 && this.waiters.length === 0) {
      this.available--;
      return Promise.resolve(true);
    }
    const remaining = deadline - performance.now();
    if (remaining <= 0) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const grant = (granted: boolean) => {
        clearTimeout(timer);
        resolve(granted);
      };
      const timer = setTimeout(() => {
        const index = this.waiters.indexOf(grant);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve(false);
      }, Math.ceil(remaining));
      this.waiters.push(grant);
    });
  }

  /** Gives a permit back: straight to the longest waiter if there is one. */
  release(): void {
    const next = this.waiters.shift();
    if (next) next(true);
    else this.available++;
  }

  /** Callers waiting for a permit. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** No permit held and nobody waiting. */
  get idle(): boolean {
    return this.available === this.capacity && this.waiters.length === 0;
  }
}
