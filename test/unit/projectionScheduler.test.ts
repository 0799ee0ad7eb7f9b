import { describe, expect, it } from 'vitest';
import { projectionCapacity, type ProjectionCapacity } from '../../src/projectors/projectionCapacity.js';
import { ProjectionScheduler, type TransactionSlot } from '../../src/projectors/projectionScheduler.js';

type Settled = Array<PromiseSettledResult<void>>;

function deferred() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A batch runner whose calls the test settles by hand. */
function manualBatches() {
  const calls: Array<{ taskIds: readonly string[]; settle: (results: Settled) => void; fail: (e: unknown) => void; release: () => void }> = [];
  const runBatch = (taskIds: readonly string[], slot: TransactionSlot) =>
    new Promise<Settled>((settle, fail) => {
      calls.push({ taskIds, settle, fail, release: () => slot.release() });
    });
  return { calls, runBatch };
}

/** A batch runner projecting each task of a batch with `project`, settling each with its own outcome. */
const eachTask = (project: (taskId: string) => Promise<void>) => (taskIds: readonly string[]) => Promise.allSettled(taskIds.map(project));

const ok: PromiseSettledResult<void> = { status: 'fulfilled', value: undefined };
const tick = () => new Promise((r) => setTimeout(r, 0));
const capacity = (c: Partial<ProjectionCapacity>): ProjectionCapacity => ({ batchSize: 8, transactions: 1, tasksInFlight: 1000, ...c });

function track(promise: Promise<void>) {
  const state = { outcome: 'pending' as string };
  promise.then(
    () => (state.outcome = 'resolved'),
    (e: Error) => (state.outcome = `rejected: ${e.message}`),
  );
  return state;
}

describe('ProjectionScheduler: one projection in flight per task, with a dirty bit', () => {
  it('settles an event only with a projection that started after it arrived', async () => {
    const runs: Array<ReturnType<typeof deferred>> = [];
    const scheduler = new ProjectionScheduler({
      capacity: capacity({ batchSize: 1, transactions: 4, tasksInFlight: 4 }),
      runBatch: eachTask(() => {
        const d = deferred();
        runs.push(d);
        return d.promise;
      }),
    });
    const settled: string[] = [];
    void scheduler.project('task').then(() => settled.push('first'));
    await Promise.resolve();
    expect(runs).toHaveLength(1);
    void scheduler.project('task').then(() => settled.push('second'));
    void scheduler.project('task').then(() => settled.push('third'));
    const idle = track(scheduler.whenIdle());
    runs[0]!.resolve();
    await tick();
    // The first run covered only the first event; the two that arrived during it share one rerun.
    expect(settled).toEqual(['first']);
    expect(runs).toHaveLength(2);
    expect(idle.outcome).toBe('pending');
    runs[1]!.resolve();
    await tick();
    expect(settled).toEqual(['first', 'second', 'third']);
    expect(runs).toHaveLength(2);
    await scheduler.whenIdle();
    expect(idle.outcome).toBe('resolved');
    expect(scheduler.activeTasks).toBe(0);
  });

  it('covers the events that arrived while a task waited for a transaction slot with the transaction it then gets', async () => {
    const { calls, runBatch } = manualBatches();
    const scheduler = new ProjectionScheduler({ capacity: capacity({ transactions: 1 }), runBatch });
    const busy = track(scheduler.project('busy'));
    const early = track(scheduler.project('waiting'));
    const late = track(scheduler.project('waiting'));
    expect(calls.map((c) => c.taskIds)).toEqual([['busy']]);
    calls[0]!.settle([ok]);
    await tick();
    expect(calls.map((c) => c.taskIds)).toEqual([['busy'], ['waiting']]);
    calls[1]!.settle([ok]);
    await tick();
    expect([busy.outcome, early.outcome, late.outcome]).toEqual(['resolved', 'resolved', 'resolved']);
    expect(calls).toHaveLength(2);
  });

  it('coalesces a burst for one task into at most two projections', async () => {
    let projections = 0;
    const scheduler = new ProjectionScheduler({
      capacity: capacity({ batchSize: 1, transactions: 2, tasksInFlight: 2 }),
      runBatch: eachTask(async () => {
        projections++;
        await new Promise((r) => setTimeout(r, 5));
      }),
    });
    await Promise.all(Array.from({ length: 1000 }, () => scheduler.project('hot')));
    expect(projections).toBeLessThanOrEqual(2);
  });

  it('never runs two projections of one task at once, and caps distinct tasks at the tasks in flight', async () => {
    let running = 0;
    let maxRunning = 0;
    const perTask = new Map<string, number>();
    const scheduler = new ProjectionScheduler({
      capacity: capacity({ batchSize: 1, transactions: 3, tasksInFlight: 3 }),
      runBatch: eachTask(async (taskId) => {
        running++;
        perTask.set(taskId, (perTask.get(taskId) ?? 0) + 1);
        expect(perTask.get(taskId)).toBe(1);
        maxRunning = Math.max(maxRunning, running);
        await new Promise((r) => setTimeout(r, 2));
        perTask.set(taskId, perTask.get(taskId)! - 1);
        running--;
      }),
    });
    await Promise.all(Array.from({ length: 200 }, (_, i) => scheduler.project(`task-${i % 10}`)));
    expect(maxRunning).toBe(3);
  });

  it('counts a task in flight until its batch settles, also after the batch gave up its slot', async () => {
    const { calls, runBatch } = manualBatches();
    const scheduler = new ProjectionScheduler({ capacity: capacity({ batchSize: 1, transactions: 1, tasksInFlight: 2 }), runBatch });
    const states = ['a', 'b', 'c'].map((id) => track(scheduler.project(id)));
    expect(calls.map((c) => c.taskIds)).toEqual([['a']]);
    expect(scheduler.activeTasks).toBe(3);
    calls[0]!.release();
    // `b` waited in flight for the slot; `c` waits for a place in flight, which `a` still holds.
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b']]);
    calls[1]!.release();
    expect(calls).toHaveLength(2);
    calls[0]!.settle([ok]);
    await tick();
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b'], ['c']]);
    calls[1]!.settle([ok]);
    calls[2]!.settle([ok]);
    await tick();
    expect(states.map((s) => s.outcome)).toEqual(['resolved', 'resolved', 'resolved']);
    expect(scheduler.activeTasks).toBe(0);
  });

  it('rejects every event a failed projection covered, and retries later ones afresh', async () => {
    let calls = 0;
    const scheduler = new ProjectionScheduler({
      capacity: capacity({ batchSize: 1, tasksInFlight: 1 }),
      runBatch: eachTask(async () => {
        calls++;
        if (calls === 1) throw new Error('database blip');
      }),
    });
    await expect(scheduler.project('t')).rejects.toThrow('database blip');
    await expect(scheduler.project('t')).resolves.toBeUndefined();
  });
});

describe('ProjectionScheduler: group commit', () => {
  it('gives a task a transaction of its own at once when a slot is free', async () => {
    const { calls, runBatch } = manualBatches();
    const scheduler = new ProjectionScheduler({ capacity: capacity({ transactions: 2, batchSize: 8 }), runBatch });
    const a = track(scheduler.project('a'));
    const b = track(scheduler.project('b'));
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b']]);
    calls[0]!.settle([ok]);
    calls[1]!.settle([ok]);
    await tick();
    expect([a.outcome, b.outcome]).toEqual(['resolved', 'resolved']);
  });

  it('puts every task that waited for a busy slot into the next transaction, up to the batch size', async () => {
    const { calls, runBatch } = manualBatches();
    const scheduler = new ProjectionScheduler({ capacity: capacity({ transactions: 1, batchSize: 3 }), runBatch });
    const states = ['a', 'b', 'c', 'd', 'e'].map((id) => track(scheduler.project(id)));
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
    const scheduler = new ProjectionScheduler({ capacity: capacity({ transactions: 1, batchSize: 8 }), runBatch });
    const first = track(scheduler.project('first'));
    const good = track(scheduler.project('good'));
    const bad = track(scheduler.project('bad'));
    calls[0]!.settle([ok]);
    await tick();
    calls[1]!.settle([ok, { status: 'rejected', reason: new Error('bus refused bad') }]);
    await tick();
    expect([first.outcome, good.outcome, bad.outcome]).toEqual(['resolved', 'resolved', 'rejected: bus refused bad']);
  });

  it('rejects every task of a transaction that threw, and of one that settled too few, then goes on', async () => {
    const { calls, runBatch } = manualBatches();
    const scheduler = new ProjectionScheduler({ capacity: capacity({ transactions: 1, batchSize: 8 }), runBatch });
    const first = track(scheduler.project('first'));
    const x = track(scheduler.project('x'));
    const y = track(scheduler.project('y'));
    calls[0]!.fail(new Error('database gone'));
    await tick();
    expect(first.outcome).toBe('rejected: database gone');
    calls[1]!.settle([ok]);
    await tick();
    expect([x.outcome, y.outcome]).toEqual(['resolved', 'rejected: batch settled 1 of 2 tasks']);
    const later = track(scheduler.project('later'));
    calls[2]!.settle([ok]);
    await tick();
    expect(later.outcome).toBe('resolved');
  });

  it('lets the next transaction start once a batch released its slot, and frees that slot only once', async () => {
    const { calls, runBatch } = manualBatches();
    const scheduler = new ProjectionScheduler({ capacity: capacity({ transactions: 1, batchSize: 8 }), runBatch });
    const states = ['a', 'b', 'c', 'd'].map((id) => track(scheduler.project(id)));
    expect(calls.map((c) => c.taskIds)).toEqual([['a']]);
    calls[0]!.release();
    calls[0]!.release();
    expect(calls.map((c) => c.taskIds)).toEqual([['a'], ['b', 'c', 'd']]);
    // The first batch still settles its task; its end does not free a second slot.
    const e = track(scheduler.project('e'));
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
    expect(() => new ProjectionScheduler({ capacity: capacity({ transactions: 0 }), runBatch })).toThrow(RangeError);
    expect(() => new ProjectionScheduler({ capacity: capacity({ batchSize: 0 }), runBatch })).toThrow(RangeError);
    expect(() => new ProjectionScheduler({ capacity: capacity({ tasksInFlight: 0 }), runBatch })).toThrow(RangeError);
  });
});

describe('projectionCapacity', () => {
  it('opens the transactions asked for, bounded by the connections and the batch size, and one on a single writer', () => {
    expect(projectionCapacity({ batchSize: 16, transactions: 4, connections: 10, singleWriter: false }).transactions).toBe(4);
    expect(projectionCapacity({ batchSize: 16, transactions: 4, connections: 2, singleWriter: false }).transactions).toBe(2);
    expect(projectionCapacity({ batchSize: 2, transactions: 4, connections: 10, singleWriter: false }).transactions).toBe(2);
    expect(projectionCapacity({ batchSize: 16, transactions: 4, connections: 1, singleWriter: true }).transactions).toBe(1);
    expect(projectionCapacity({ batchSize: 16, singleWriter: false }).transactions).toBe(1);
  });

  it('lets a full batch per connection plus one more be in flight', () => {
    expect(projectionCapacity({ batchSize: 16, transactions: 1, connections: 10, singleWriter: false })).toEqual({
      batchSize: 16,
      transactions: 1,
      tasksInFlight: 176,
    });
    expect(projectionCapacity({ batchSize: 16, transactions: 1, connections: 1, singleWriter: true })).toEqual({
      batchSize: 16,
      transactions: 1,
      tasksInFlight: 32,
    });
    // Without a pool size, the transactions are the connections.
    expect(projectionCapacity({ batchSize: 2, transactions: 2, singleWriter: false }).tasksInFlight).toBe(6);
  });

  it('refuses a batch size below one', () => {
    expect(() => projectionCapacity({ batchSize: 0, singleWriter: false })).toThrow(RangeError);
  });
});
