import type { RepositoryContext } from '../../src/repository/context.js';
import { microsToTimestamp, timestampToMicros, toCanonicalTimestamp, type Clock } from '../../src/timestamps.js';

/**
 * A clock tests move by hand. Each reading returns the current instant and then advances it by one
 * microsecond, so two writes never tie by accident, while `set` pins the next reading exactly.
 */
export interface ManualClock {
  readonly clock: Clock;
  /** The next reading will be exactly `instant`. */
  set(instant: string): void;
  /** What the next reading will return. */
  peek(): string;
}

export function createManualClock(start: string): ManualClock {
  let next = timestampToMicros(toCanonicalTimestamp(start));
  return {
    clock: () => microsToTimestamp(next++),
    set(instant) {
      next = timestampToMicros(toCanonicalTimestamp(instant));
    },
    peek: () => microsToTimestamp(next),
  };
}

/** The same database and dialect as `ctx`, with writes stamped by a manual clock. */
export function withManualClock(ctx: RepositoryContext, start: string): { ctx: RepositoryContext; time: ManualClock } {
  const time = createManualClock(start);
  return { ctx: { ...ctx, clock: time.clock }, time };
}
