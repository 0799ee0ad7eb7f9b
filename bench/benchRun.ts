/**
 * What every benchmark script shares around its measurements: progress on stderr, cleanups that run
 * after an error or a first SIGINT/SIGTERM too, and one exit-code rule. A bench that completed exits
 * 0 whatever its verdicts (PASS and FAIL are printed results); it exits non-zero only when it could
 * not run: 2 for bad arguments, 1 for anything else that stopped it (a service not reachable, an
 * error, a wrong answer that leaves its figures meaningless), 130 after a signal.
 */

export class UsageError extends Error {
  override name = 'UsageError';
  readonly code = 'BENCH_USAGE';
}

/** The system under test answered wrongly: the run stops, since its figures would mean nothing. */
export class WrongAnswerError extends Error {
  override name = 'WrongAnswerError';
  readonly code = 'BENCH_WRONG_ANSWER';
}

export const progress = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

export const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

const cleanups = new Set<() => Promise<void>>();

/**
 * Registers `fn` to run at the end of the run, after an error or on a signal; the returned function
 * runs it now instead (once).
 */
export function onCleanup(fn: () => Promise<unknown>): () => Promise<void> {
  let done: Promise<void> | undefined;
  const once = () =>
    (done ??= fn().then(
      () => undefined,
      (err: Error) => progress(`cleanup failed: ${err.message}`),
    ));
  cleanups.add(once);
  return async () => {
    await once();
    cleanups.delete(once);
  };
}

/** Runs every registered cleanup, newest first (workers before streams before connections before databases). */
export async function runCleanups(): Promise<void> {
  for (const fn of [...cleanups].reverse()) await fn();
  cleanups.clear();
}

/**
 * Runs `parse` (node:util parseArgs, strict) over the command line: `--help` prints `usage` and
 * exits 0 first; a bad option or a stray argument becomes a UsageError.
 */
export function parseCommandLine<T>(parse: () => T, usage: string): T {
  if (process.argv.slice(2).some((arg) => arg === '--help' || arg === '-h')) {
    process.stdout.write(`${usage.trim()}\n`);
    process.exit(0);
  }
  try {
    return parse();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err instanceof UsageError) return err.message;
  // Knex quotes the whole failed statement before the driver's reason; a bulk INSERT is megabytes.
  const message = err.message.length > 1500 ? `${err.message.slice(0, 300)} [...] ${err.message.slice(-800)}` : err.message;
  const frames = (err.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l)).slice(0, 8);
  return [`${err.name}: ${message}`, ...frames].join('\n');
}

/** Runs a benchmark's main function under the exit-code rule above. */
export function runBench(name: string, main: () => Promise<void>): void {
  let interrupted = false;
  const onSignal = (signal: string) => {
    interrupted = true;
    progress(`${signal}: cleaning up`);
    void runCleanups().finally(() => process.exit(130));
  };
  process.once('SIGINT', () => onSignal('SIGINT'));
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  main()
    .then(runCleanups)
    .then(
      () => {
        process.exitCode = 0;
      },
      async (err: unknown) => {
        // The cleanups a signal started close what main was using; its error says nothing then.
        if (interrupted) return;
        process.stderr.write(`${name} could not run: ${describeError(err)}\n`);
        if (err instanceof UsageError) process.stderr.write(`(${name} -- --help lists the options)\n`);
        await runCleanups();
        process.exitCode = err instanceof UsageError ? 2 : 1;
      },
    );
}
