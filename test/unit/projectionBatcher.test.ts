import { describe, expect, it } from 'vitest';
import { ProjectionBatcher } from '../../src/projectors/projectionBatcher.js';

/** A runBatch whose calls the test settles by hand. */
function manualBatches() {
  const calls: Array<{
    taskIds: readonly string[];
    settle: (results: Array<PromiseSettledResult<void>>) => void;
    fail: (e: unknown) => void;
    release: () => void;
  }> = [];
  const runBatch = (taskIds: readonly string[], release: () => void) =>
    new Promise<Array<PromiseSettledResult<void>>>((settle, fail) => {
      calls.push({ taskIds, settle, fail, release });
    });
  return { calls, runBatch };
}

const ok: PromiseSettledResult<void> = { status: 'fulfilled', value: undefined };
const tick = () => new Promise((r) => setTimeout(r, 0));

function track(promise: Promise<void>) {
  const state = { outcome: 'pending' as string };
  promise.then(
    () => (state.outcome = 'resolved'),
    (e: Error) => (state.outcome = `rejected: ${e.message}`),
  );
  return state;
}

describe('ProjectionBatcher', () => {
  it('gives a task a transaction of its own at once when a slot is free', async () => {
    const { calls, runBatch } = manualBatches();
    const batcher = new ProjectionBatcher({ runBatch, maxBatches: 2, maxBatchSize: 8 });
    const a = track(batcher.project('a'));
    const b = track(batcher.project('b'));
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b']]);
    calls[0]!.settle([ok]);
    calls[1]!.settle([ok]);
    await tick();
    expect([a.outcome, b.outcome]).toEqual(['resolved', 'resolved']);
  });

  it('puts every task that waited for a busy slot into the next transaction, up to maxBatchSize', async () => {
    const { calls, runBatch } = manualBatches();
    const batcher = new ProjectionBatcher({ runBatch, maxBatches: 1, maxBatchSize: 3 });
    const states = ['a', 'b', 'c', 'd', 'e'].map((id) => track(batcher.project(id)));
    expect(calls.map((c) => c.taskIds)).toEqual([['a']]);
    calls[0]!.settle([ok]);
    await tick();
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b', 'c', 'd']]);
    expect(states.map((s) => s.outcome)).toEqual(['resolved', 'pending', 'pending', 'pending', 'pending']);
    calls[1]!.settle([ok, ok, ok]);
    await tick();
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b', 'c', 'd'], ['e']]);
    calls[2]!.settle([ok]);
    await tick();
    expect(states.map((s) => s.outcome)).toEqual(['resolved', 'resolved', 'resolved', 'resolved', 'resolved']);
  });

  it('settles each task of a transaction with its own outcome', async () => {
    const { calls, runBatch } = manualBatches();
    const batcher = new ProjectionBatcher({ runBatch, maxBatches: 1, maxBatchSize: 8 });
    const first = track(batcher.project('first'));
    const good = track(batcher.project('good'));
    const bad = track(batcher.project('bad'));
    calls[0]!.settle([ok]);
    await tick();
    calls[1]!.settle([ok, { status: 'rejected', reason: new Error('bus refused bad') }]);
    await tick();
    expect([first.outcome, good.outcome, bad.outcome]).toEqual(['resolved', 'resolved', 'rejected: bus refused bad']);
  });

  it('rejects every task of a transaction that threw, and of one that settled too few, then goes on', async () => {
    const { calls, runBatch } = manualBatches();
    const batcher = new ProjectionBatcher({ runBatch, maxBatches: 1, maxBatchSize: 8 });
    const first = track(batcher.project('first'));
    const x = track(batcher.project('x'));
    const y = track(batcher.project('y'));
    calls[0]!.fail(new Error('database gone'));
    await tick();
    expect(first.outcome).toBe('rejected: database gone');
    calls[1]!.settle([ok]);
    await tick();
    expect([x.outcome, y.outcome]).toEqual(['resolved', 'rejected: batch settled 1 of 2 tasks']);
    const later = track(batcher.project('later'));
    calls[2]!.settle([ok]);
    await tick();
    expect(later.outcome).toBe('resolved');
  });

  it('lets the next transaction start once a batch released its slot, and frees that slot only once', async () => {
    const { calls, runBatch } = manualBatches();
    const batcher = new ProjectionBatcher({ runBatch, maxBatches: 1, maxBatchSize: 8 });
    const states = ['a', 'b', 'c', 'd'].map((id) => track(batcher.project(id)));
    expect(calls.map((c) => c.taskIds)).toEqual([['a']]);
    calls[0]!.release();
    calls[0]!.release();
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b', 'c', 'd']]);
    // The first batch still settles its task; its end does not free a second slot.
    const e = track(batcher.project('e'));
    calls[0]!.settle([ok]);
    await tick();
    expect(calls).toHaveLength(2);
    expect(states[0]!.outcome).toBe('resolved');
    calls[1]!.settle([ok, ok, ok]);
    await tick();
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b', 'c', 'd'], ['e']]);
    calls[2]!.settle([ok]);
    await tick();
    expect([...states, e].map((s) => s.outcome)).toEqual(['resolved', 'resolved', 'resolved', 'resolved', 'resolved']);
  });

  it('refuses limits below one', () => {
    const { runBatch } = manualBatches();
    expect(() => new ProjectionBatcher({ runBatch, maxBatches: 0, maxBatchSize: 8 })).toThrow(RangeError);
    expect(() => new ProjectionBatcher({ runBatch, maxBatches: 1, maxBatchSize: 0 })).toThrow(RangeError);
  });
});
