/**
 * A slot a run holds while it works. A run may give it up before it is done (`release`: a COMMIT
 * waiting on the disk, publishes after it) so the next run starts beside it, and take one again for
 * more work that needs one (`take`: a reread, a retry), waiting its turn before any new run.
 */
export interface RunSlot {
  /** Gives the slot up. Idempotent; the coalescer releases it at the latest when the run settles. */
  release(): void;
  /** Takes a slot again after `release`; resolves at once while this run holds one. */
  take(): Promise<void>;
}

/** A slot that is no coalescer's: for the same work run outside one (reconcile pages, tools). */
export const NO_SLOT: RunSlot = { release: () => undefined, take: () => Promise.resolve() };

/**
 * One run over distinct keys (one key unless `batchSize` is larger), in the order given. Settles
 * each key: an array of outcomes in key order, or nothing when every key succeeded; a rejection
 * fails every key of the run. Never called twice at the same time for one key.
 */
type KeyRun<K> = (keys: readonly K[], slot: RunSlot) => Promise<ReadonlyArray<PromiseSettledResult<unknown>> | void>;

export interface KeyedCoalescerOptions<K> {
  run: KeyRun<K>;
  /** Runs holding a slot at once. */
  concurrency: number;
  /** Keys one run takes at most (default 1). */
  batchSize?: number;
  /** Keys admitted at once, waiting for a slot or in a run (default `concurrency × batchSize`). */
  keysInFlight?: number;
  /** A run failed for a key nobody waits on (marked with `mark`): the only place that failure goes. */
  onError?: (key: K, error: unknown) => void;
  /** Called whenever the keys in flight or waiting for admission changed (gauges). */
  onCounts?: (counts: { inFlight: number; waiting: number }) => void;
}

interface Waiter {
  resolve(): void;
  reject(error: unknown): void;
}

interface KeyState {
  /** `waiting`: marked, not admitted yet; `admitted`: waiting for a slot; `running`: its run began. */
  phase: 'waiting' | 'admitted' | 'running';
  /** Marked since its run began: it runs again once that run settled. */
  dirty: boolean;
  /** Callers waiting for the next run of the key to begin and settle. */
  waiters: Waiter[];
}

/** Why a mark's promise rejected without a run: the coalescer stopped first. */
export class CoalescerStoppedError extends Error {
  constructor() {
    super('stopped before the key ran');
    this.name = 'CoalescerStoppedError';
  }
}

/**
 * Runs work per key when asked, coalescing the asks:
 *
 * - At most one run of a key at a time. A mark settles only with a run that BEGAN after it, so a
 *   caller told "done" knows the run saw everything before its mark; marks made while the key
 *   waits ride along with its next run, and marks made while it runs make it dirty: it runs once
 *   more afterwards, behind the keys already waiting. N marks cost a handful of runs, not N.
 * - At most `keysInFlight` keys admitted; the others wait in arrival order.
 * - At most `concurrency` runs hold a slot. Idle, a key gets a run of its own at once; while every
 *   slot is busy admitted keys wait, and the next free slot takes up to `batchSize` of them into
 *   ONE run (group commit: per-run costs are shared under load).
 */
export class KeyedCoalescer<K> {
  private readonly keys = new Map<K, KeyState>();
  /** Marked keys waiting for admission, in arrival order. */
  private readonly waiting: K[] = [];
  /** Admitted keys waiting for a slot. */
  private readonly ready: K[] = [];
  /** Runs that gave their slot up and wait to take one again; served before new runs. */
  private readonly retakes: Array<() => void> = [];
  private inFlight = 0;
  private slotsTaken = 0;
  private stopped = false;
  private idleWaiters: Array<() => void> = [];
  private readonly batchSize: number;
  private readonly keysInFlight: number;

  constructor(private readonly options: KeyedCoalescerOptions<K>) {
    this.batchSize = options.batchSize ?? 1;
    this.keysInFlight = options.keysInFlight ?? options.concurrency * this.batchSize;
    if (!(this.batchSize >= 1) || !(options.concurrency >= 1) || !(this.keysInFlight >= 1)) {
      throw new RangeError('batch size, concurrency and keys in flight must be at least 1');
    }
  }

  /** Keys marked and not settled yet (waiting, admitted or running). */
  get activeKeys(): number {
    return this.keys.size;
  }

  /** Resolves once a run of `key` that began after this call settled it; rejects when that run failed for it. */
  schedule(key: K): Promise<void> {
    return new Promise((resolve, reject) => this.add(key, { resolve, reject }));
  }

  /** `schedule` for a caller that does not wait: a failure goes to `onError`. Ignored once stopped. */
  mark(key: K): void {
    this.add(key, undefined);
  }

  /** Resolves once no key is waiting, admitted or running. */
  whenIdle(): Promise<void> {
    if (this.keys.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Takes no more marks, drops the keys not admitted yet and every rerun due (their waiters reject
   * with CoalescerStoppedError), and resolves once the runs in flight settled. Idempotent.
   */
  stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      for (const key of this.waiting.splice(0)) {
        const state = this.keys.get(key)!;
        this.keys.delete(key);
        for (const waiter of state.waiters) waiter.reject(new CoalescerStoppedError());
      }
      this.counts();
      this.settleIdle();
    }
    return this.whenIdle();
  }

  private add(key: K, waiter: Waiter | undefined): void {
    if (this.stopped) {
      waiter?.reject(new CoalescerStoppedError());
      return;
    }
    const state = this.keys.get(key);
    if (!state) {
      this.keys.set(key, { phase: 'waiting', dirty: true, waiters: waiter ? [waiter] : [] });
      this.waiting.push(key);
      this.pump();
      return;
    }
    if (waiter) state.waiters.push(waiter);
    // Waiting or admitted: this mark rides along with the run to come. Running: a rerun is due.
    state.dirty = true;
  }

  private pump(): void {
    while (this.inFlight < this.keysInFlight && this.waiting.length > 0) {
      const key = this.waiting.shift()!;
      this.keys.get(key)!.phase = 'admitted';
      this.inFlight++;
      this.ready.push(key);
    }
    while (this.slotsTaken < this.options.concurrency && this.retakes.length > 0) {
      this.slotsTaken++;
      this.retakes.shift()!();
    }
    while (this.slotsTaken < this.options.concurrency && this.ready.length > 0) {
      const batch = this.ready.splice(0, this.batchSize);
      this.slotsTaken++;
      void this.runBatch(batch);
    }
    this.counts();
  }

  private async runBatch(keys: K[]): Promise<void> {
    // The marks this run covers: those made before it began.
    const covered = keys.map((key) => {
      const state = this.keys.get(key)!;
      state.phase = 'running';
      state.dirty = false;
      const waiters = state.waiters;
      state.waiters = [];
      return waiters;
    });
    const slot = this.lendSlot();
    let settled: ReadonlyArray<PromiseSettledResult<unknown>> | void;
    try {
      settled = await this.options.run(keys, slot);
    } catch (error) {
      settled = keys.map(() => ({ status: 'rejected', reason: error }));
    }
    slot.release();
    keys.forEach((key, i) => {
      const outcome: PromiseSettledResult<unknown> = settled
        ? (settled[i] ?? { status: 'rejected', reason: new Error(`a run settled ${settled.length} of its ${keys.length} keys`) })
        : { status: 'fulfilled', value: undefined };
      this.settle(key, covered[i]!, outcome);
    });
    this.pump();
    this.settleIdle();
  }

  private settle(key: K, waiters: Waiter[], outcome: PromiseSettledResult<unknown>): void {
    if (outcome.status === 'rejected' && waiters.length === 0) this.options.onError?.(key, outcome.reason);
    for (const waiter of waiters) {
      if (outcome.status === 'fulfilled') waiter.resolve();
      else waiter.reject(outcome.reason);
    }
    const state = this.keys.get(key)!;
    this.inFlight--;
    if (state.dirty && !this.stopped) {
      state.phase = 'waiting';
      this.waiting.push(key);
      return;
    }
    this.keys.delete(key);
    for (const waiter of state.waiters) waiter.reject(new CoalescerStoppedError());
  }

  private lendSlot(): RunSlot {
    let held = true;
    let taking: Promise<void> | undefined;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.slotsTaken--;
        this.pump();
      },
      take: () => {
        if (held) return Promise.resolve();
        if (taking) return taking;
        taking = new Promise<void>((resolve) => {
          this.retakes.push(() => {
            held = true;
            taking = undefined;
            resolve();
          });
        });
        const waitForSlot = taking;
        this.pump();
        return waitForSlot;
      },
    };
  }

  private counts(): void {
    this.options.onCounts?.({ inFlight: this.inFlight, waiting: this.waiting.length });
  }

  private settleIdle(): void {
    if (this.keys.size > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
