import { FifoSemaphore } from './fifoSemaphore.js';

/**
 * One FIFO mutex per key, created on first use and dropped once nobody holds or waits for it, so
 * the map stays as small as the set of keys in use. Holds no resource but the promise queue.
 */
export class KeyedMutex {
  private readonly locks = new Map<string, FifoSemaphore>();

  /** Resolves true holding `key`, or false (holding nothing) if `deadline` (performance.now()) passed first. */
  async acquire(key: string, deadline: number): Promise<boolean> {
    let lock = this.locks.get(key);
    if (!lock) this.locks.set(key, (lock = new FifoSemaphore(1)));
    const granted = await lock.acquire(deadline);
    if (!granted) this.dropIfIdle(key, lock);
    return granted;
  }

  release(key: string): void {
    const lock = this.locks.get(key);
    if (!lock) throw new Error(`KeyedMutex: ${JSON.stringify(key)} released but not held`);
    lock.release();
    this.dropIfIdle(key, lock);
  }

  /** Callers waiting for `key`. */
  waiting(key: string): number {
    return this.locks.get(key)?.waiting ?? 0;
  }

  private dropIfIdle(key: string, lock: FifoSemaphore): void {
    if (lock.idle && this.locks.get(key) === lock) this.locks.delete(key);
  }
}
