import type { Logger } from 'pino';

/** What a run tells the loop: `done` ends it (nothing is left to do); anything else runs it again. */
export type PeriodicVerdict = void | 'done';

export interface PeriodicOptions {
  /** Between the end of a run and the start of the next: runs never overlap. */
  intervalMs: number;
  /**
   * `at-start`: `start()` runs once and resolves after that run (a failure is logged, not thrown:
   * the next run tries again); `after-interval`: the first run comes one interval after `start()`.
   */
  firstRun: 'at-start' | 'after-interval';
  /** One run; `first` is true for the first one. A rejection is logged and the loop goes on. */
  run(context: { first: boolean }): Promise<PeriodicVerdict>;
  logger: Pick<Logger, 'warn' | 'error'>;
  /** The log line of a failed run, with the error as `err`. */
  failureMessage: string;
  /** Default `error`; `warn` where a failure is expected now and then and costs nothing lasting. */
  failureLevel?: 'warn' | 'error';
}

/** A loop of runs on a timer: the worker's probes, polls, reconciliations and recoveries. */
export interface Periodic {
  /** Starts the loop (see `firstRun`). Once: a second call does nothing. */
  start(): Promise<void>;
  /** Ends the loop and resolves once the run in flight, if any, settled. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Runs `run` every `intervalMs`, measured from the end of the previous run, until `stop()` or a run
 * resolving `done`. Timers are unref'd: a loop never keeps the process alive on its own.
 */
export function periodic(options: PeriodicOptions): Periodic {
  let state: 'new' | 'running' | 'stopped' = 'new';
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> | undefined;
  let runs = 0;

  const runOnce = async (): Promise<PeriodicVerdict> => {
    try {
      return await options.run({ first: runs++ === 0 });
    } catch (err) {
      options.logger[options.failureLevel ?? 'error']({ err }, options.failureMessage);
      return undefined;
    }
  };
  const tick = (): Promise<void> => {
    timer = undefined;
    if (state !== 'running') return Promise.resolve();
    const pass = runOnce().then((verdict) => {
      inFlight = undefined;
      if (verdict !== 'done') schedule();
    });
    inFlight = pass;
    return pass;
  };
  const schedule = () => {
    if (state !== 'running') return;
    timer = setTimeout(() => void tick(), options.intervalMs);
    timer.unref();
  };

  return {
    async start() {
      if (state !== 'new') return;
      state = 'running';
      if (options.firstRun === 'at-start') await tick();
      else schedule();
    },
    async stop() {
      state = 'stopped';
      clearTimeout(timer);
      await inFlight;
    },
  };
}
