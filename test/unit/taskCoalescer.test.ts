import { describe, expect, it } from 'vitest';
import { TaskCoalescer } from '../../src/projectors/taskCoalescer.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('TaskCoalescer', () => {
  it('settles an event only with a projection that started after it arrived', async () => {
    const runs: Array<ReturnType<typeof deferred>> = [];
    const coalescer = new TaskCoalescer({
      concurrency: 4,
      project: () => {
        const d = deferred();
        runs.push(d);
        return d.promise;
      },
    });
    const settled: string[] = [];
    void coalescer.run('task').then(() => settled.push('first'));
    await Promise.resolve();
    expect(runs).toHaveLength(1);
    void coalescer.run('task').then(() => settled.push('second'));
    void coalescer.run('task').then(() => settled.push('third'));
    runs[0]!.resolve();
    await new Promise((r) => setTimeout(r, 0));
    // The first run covered only the first event; the two that arrived during it share one rerun.
    expect(settled).toEqual(['first']);
    expect(runs).toHaveLength(2);
    runs[1]!.resolve();
    await new Promise((r) => setTimeout(r, 0));
    expect(settled).toEqual(['first', 'second', 'third']);
    expect(runs).toHaveLength(2);
    await coalescer.whenIdle();
    expect(coalescer.activeTasks).toBe(0);
  });

  it('coalesces a burst for one task into at most two projections', async () => {
    let projections = 0;
    const coalescer = new TaskCoalescer({
      concurrency: 2,
      project: async () => {
        projections++;
        await new Promise((r) => setTimeout(r, 5));
      },
    });
    await Promise.all(Array.from({ length: 1000 }, () => coalescer.run('hot')));
    expect(projections).toBeLessThanOrEqual(2);
  });

  it('never runs two projections of one task at once, and caps distinct tasks at the concurrency', async () => {
    let running = 0;
    let maxRunning = 0;
    const perTask = new Map<string, number>();
    const coalescer = new TaskCoalescer({
      concurrency: 3,
      project: async (taskId) => {
        running++;
        perTask.set(taskId, (perTask.get(taskId) ?? 0) + 1);
        expect(perTask.get(taskId)).toBe(1);
        maxRunning = Math.max(maxRunning, running);
        await new Promise((r) => setTimeout(r, 2));
        perTask.set(taskId, perTask.get(taskId)! - 1);
        running--;
      },
    });
    await Promise.all(Array.from({ length: 200 }, (_, i) => coalescer.run(`task-${i % 10}`)));
    expect(maxRunning).toBe(3);
  });

  it('rejects every event a failed projection covered, and retries later ones afresh', async () => {
    let calls = 0;
    const coalescer = new TaskCoalescer({
      concurrency: 1,
      project: async () => {
        calls++;
        if (calls === 1) throw new Error('database blip');
      },
    });
    await expect(coalescer.run('t')).rejects.toThrow('database blip');
    await expect(coalescer.run('t')).resolves.toBeUndefined();
  });
});
