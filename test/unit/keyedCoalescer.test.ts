import { describe, expect, it } from 'vitest';
import { CoalescerStoppedError, KeyedCoalescer, type RunSlot } from '../../src/background/keyedCoalescer.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A run whose calls the test settles by hand. */
function manualRuns() {
  const calls: Array<{ keys: readonly string[]; slot: RunSlot } & ReturnType<typeof deferred>> = [];
  const run = (keys: readonly string[], slot: RunSlot) => {
    const d = deferred();
    calls.push({ keys, slot, ...d });
    return d.promise;
  };
  return { calls, run };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

function track(promise: Promise<void>) {
  const state = { outcome: 'pending' as string };
  promise.then(
    () => (state.outcome = 'resolved'),
    (e: Error) => (state.outcome = `rejected: ${e.message}`),
  );
  return state;
}

describe('KeyedCoalescer', () => {
  it('runs a key at most once at a time, and once more when it was marked during its run', async () => {
    const { calls, run } = manualRuns();
    const coalescer = new KeyedCoalescer<string>({ run, concurrency: 4 });
    const first = track(coalescer.schedule('a'));
    expect(calls.map((c) => c.keys)).toEqual([['a']]);
    const second = track(coalescer.schedule('a'));
    coalescer.mark('a');
    const third = track(coalescer.schedule('a'));
    expect(calls).toHaveLength(1);
    calls[0]!.resolve();
    await tick();
    // The run covered the mark before it began; the three during it share one rerun.
    expect([first.outcome, second.outcome, third.outcome]).toEqual(['resolved', 'pending', 'pending']);
    expect(calls).toHaveLength(2);
    calls[1]!.resolve();
    await tick();
    expect([second.outcome, third.outcome]).toEqual(['resolved', 'resolved']);
    expect(calls).toHaveLength(2);
    expect(coalescer.activeKeys).toBe(0);
  });

  it('keeps at most `concurrency` runs going and admits the waiting keys in arrival order', async () => {
    const { calls, run } = manualRuns();
    const counts: Array<{ inFlight: number; waiting: number }> = [];
    const coalescer = new KeyedCoalescer<string>({ run, concurrency: 2, onCounts: (c) => counts.push(c) });
    for (const key of ['a', 'b', 'c', 'd', 'c']) coalescer.mark(key);
    expect(calls.map((c) => c.keys[0])).toEqual(['a', 'b']);
    expect(counts.at(-1)).toEqual({ inFlight: 2, waiting: 2 });
    calls[1]!.resolve();
    await tick();
    expect(calls.map((c) => c.keys[0])).toEqual(['a', 'b', 'c']);
    calls[0]!.resolve();
    await tick();
    expect(calls.map((c) => c.keys[0])).toEqual(['a', 'b', 'c', 'd']);
  });

  it('puts a rerun behind the keys already waiting', async () => {
    const { calls, run } = manualRuns();
    const coalescer = new KeyedCoalescer<string>({ run, concurrency: 1 });
    coalescer.mark('a');
    coalescer.mark('b');
    coalescer.mark('a');
    calls[0]!.resolve();
    await tick();
    calls[1]!.resolve();
    await tick();
    expect(calls.map((c) => c.keys[0])).toEqual(['a', 'b', 'a']);
  });

  it('gives the next free slot every admitted key, up to the batch size, in one run', async () => {
    const { calls, run } = manualRuns();
    const coalescer = new KeyedCoalescer<string>({ run, concurrency: 1, batchSize: 2, keysInFlight: 10 });
    for (const key of ['a', 'b', 'c', 'd']) coalescer.mark(key);
    expect(calls.map((c) => c.keys)).toEqual([['a']]);
    calls[0]!.resolve();
    await tick();
    expect(calls.map((c) => c.keys)).toEqual([['a'], ['b', 'c']]);
  });

  it('settles each key of a run with its own outcome, and reports a failure nobody waits on', async () => {
    const errors: Array<[string, unknown]> = [];
    const coalescer = new KeyedCoalescer<string>({
      concurrency: 1,
      batchSize: 4,
      run: async (keys) =>
        keys.map((key) => (key === 'bad' ? { status: 'rejected', reason: new Error(`no ${key}`) } : { status: 'fulfilled', value: undefined })),
      onError: (key, err) => errors.push([key, err]),
    });
    const good = track(coalescer.schedule('good'));
    coalescer.mark('bad');
    const bad = track(coalescer.schedule('bad2'));
    await tick();
    expect(good.outcome).toBe('resolved');
    expect(bad.outcome).toBe('resolved');
    expect(errors).toEqual([['bad', new Error('no bad')]]);
  });

  it('fails every key of a run that rejects', async () => {
    const coalescer = new KeyedCoalescer<string>({ concurrency: 1, run: () => Promise.reject(new Error('down')) });
    await expect(coalescer.schedule('a')).rejects.toThrow('down');
    expect(coalescer.activeKeys).toBe(0);
  });

  it('lets a run give its slot up early, and take one again before any new run', async () => {
    const { calls, run } = manualRuns();
    const coalescer = new KeyedCoalescer<string>({ run, concurrency: 1, keysInFlight: 10 });
    coalescer.mark('a');
    coalescer.mark('b');
    coalescer.mark('c');
    calls[0]!.slot.release();
    expect(calls.map((c) => c.keys[0])).toEqual(['a', 'b']);
    const retaken = track(calls[0]!.slot.take());
    await tick();
    expect(retaken.outcome).toBe('pending');
    calls[1]!.resolve();
    await tick();
    // `a` took the freed slot again; `c` waits for it.
    expect(retaken.outcome).toBe('resolved');
    expect(calls.map((c) => c.keys[0])).toEqual(['a', 'b']);
    calls[0]!.resolve();
    await tick();
    expect(calls.map((c) => c.keys[0])).toEqual(['a', 'b', 'c']);
  });

  it('resolves whenIdle once nothing is waiting or running', async () => {
    const { calls, run } = manualRuns();
    const coalescer = new KeyedCoalescer<string>({ run, concurrency: 1 });
    await coalescer.whenIdle();
    coalescer.mark('a');
    coalescer.mark('b');
    const idle = track(coalescer.whenIdle());
    calls[0]!.resolve();
    await tick();
    expect(idle.outcome).toBe('pending');
    calls[1]!.resolve();
    await tick();
    expect(idle.outcome).toBe('resolved');
  });

  it('stops: drops the waiting keys and the reruns due, waits for the runs in flight, takes no more marks', async () => {
    const { calls, run } = manualRuns();
    const coalescer = new KeyedCoalescer<string>({ run, concurrency: 1 });
    const running = track(coalescer.schedule('a'));
    const rerun = track(coalescer.schedule('a'));
    const waiting = track(coalescer.schedule('b'));
    const stopped = track(coalescer.stop());
    await tick();
    expect(waiting.outcome).toBe(`rejected: ${new CoalescerStoppedError().message}`);
    expect(stopped.outcome).toBe('pending');
    calls[0]!.resolve();
    await tick();
    expect(running.outcome).toBe('resolved');
    expect(rerun.outcome).toMatch(/^rejected/);
    expect(stopped.outcome).toBe('resolved');
    coalescer.mark('c');
    await expect(coalescer.schedule('c')).rejects.toBeInstanceOf(CoalescerStoppedError);
    expect(calls).toHaveLength(1);
  });

  it('refuses a capacity below one', () => {
    expect(() => new KeyedCoalescer<string>({ run: async () => undefined, concurrency: 0 })).toThrow(RangeError);
  });
});
