import type { DialectName } from '../src/repository/dialect.js';
import { UsageError } from './benchRun.js';

/**
 * The checks every bench runs on its parsed command line, gathering every problem so one run names
 * them all; `done()` throws the UsageError (exit 2) when there is any.
 */
export function optionChecks() {
  const problems: string[] = [];
  return {
    /** `--dialect sqlite|postgres|both` as the dialects to run. */
    dialects(raw: string): DialectName[] {
      if (raw === 'both') return ['sqlite', 'postgres'];
      if (raw === 'sqlite' || raw === 'postgres') return [raw];
      problems.push(`--dialect must be sqlite, postgres or both (got ${raw})`);
      return [];
    },
    /** An integer option of at least `min`. */
    int(name: string, raw: string, min: number): number {
      const n = Number(raw);
      if (!Number.isInteger(n) || n < min) problems.push(`--${name} must be an integer >= ${min} (got ${raw})`);
      return n;
    },
    problem(message: string): void {
      problems.push(message);
    },
    done(): void {
      if (problems.length > 0) throw new UsageError(`bad arguments:\n  ${problems.join('\n  ')}`);
    },
  };
}
