import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { periodic, type PeriodicVerdict } from '../../src/background/periodic.js';

function recordingLogger() {
  const lines: Array<{ level: string; msg: string; err: unknown }> = [];
  const at = (level: string) => (obj: { err?: unknown }, msg: string) => lines.push({ level, msg, err: obj.err });
  return { lines, logger: { warn: at('warn'), error: at('error') } as never };
}

describe('periodic', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs at start and waits for that run, then every interval after the end of the previous run', async () => {
    const { logger } = recordingLogger();
    const firsts: boolean[] = [];
    const loop = periodic({ intervalMs: 100, firstRun: 'at-start', logger, failureMessage: 'x failed', run: async ({ first }) => void firsts.push(first) });
    await loop.start();
    expect(firsts).toEqual([true]);
    await vi.advanceTimersByTimeAsync(99);
    expect(firsts).toEqual([true]);
    await vi.advanceTimersByTimeAsync(1);
    expect(firsts).toEqual([true, false]);
    await vi.advanceTimersByTimeAsync(200);
    expect(firsts).toEqual([true, false, false, false]);
    await loop.stop();
    await vi.advanceTimersByTimeAsync(500);
    expect(firsts).toHaveLength(4);
  });

  it('runs first one interval after start when told so', async () => {
    const { logger } = recordingLogger();
    let runs = 0;
    const loop = periodic({ intervalMs: 100, firstRun: 'after-interval', logger, failureMessage: 'x failed', run: async () => void runs++ });
    await loop.start();
    expect(runs).toBe(0);
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(1);
    await loop.stop();
  });

  it('logs a failed run once, at the level asked, and runs again', async () => {
    const { lines, logger } = recordingLogger();
    let runs = 0;
    const boom = new Error('boom');
    const loop = periodic({
      intervalMs: 10,
      firstRun: 'at-start',
      logger,
      failureMessage: 'probe failed',
      failureLevel: 'warn',
      run: async () => {
        runs++;
        if (runs === 1) throw boom;
      },
    });
    await loop.start();
    expect(lines).toEqual([{ level: 'warn', msg: 'probe failed', err: boom }]);
    await vi.advanceTimersByTimeAsync(10);
    expect(runs).toBe(2);
    await loop.stop();
  });

  it('ends once a run says it is done', async () => {
    const { logger } = recordingLogger();
    const verdicts: PeriodicVerdict[] = [undefined, 'done'];
    let runs = 0;
    const loop = periodic({ intervalMs: 10, firstRun: 'at-start', logger, failureMessage: 'x failed', run: async () => verdicts[runs++] });
    await loop.start();
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(2);
    await loop.stop();
  });

  it('stops: waits for the run in flight and runs no more', async () => {
    const { logger } = recordingLogger();
    let release!: () => void;
    let runs = 0;
    const loop = periodic({
      intervalMs: 10,
      firstRun: 'after-interval',
      logger,
      failureMessage: 'x failed',
      run: () => {
        runs++;
        return new Promise<void>((resolve) => (release = resolve));
      },
    });
    await loop.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(runs).toBe(1);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    release();
    await stopping;
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toBe(1);
    await loop.stop();
  });
});
