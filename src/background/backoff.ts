/**
 * A growing wait between attempts, in p-retry's own option names, so the one object serves both
 * ways of waiting: handed to `pRetry` (spread into its options) where this process retries a call
 * itself, and to `backoffDelayMs` where the wait is handed to someone else (a receipt's
 * `retry_after`, a nak's redelivery delay). No jitter: p-retry's `randomize` stays off.
 */
export interface Backoff {
  /** The wait before the first retry. */
  readonly minTimeout: number;
  /** Each further retry waits this many times longer (1: a fixed wait). */
  readonly factor: number;
  /** The longest wait. */
  readonly maxTimeout: number;
}

/**
 * The wait before retry number `retry` (0: the first): `minTimeout · factor^retry`, at most
 * `maxTimeout`, as p-retry computes it (without its rounding, the inputs being whole). A retry
 * number that is negative or not a number counts as the first.
 */
export function backoffDelayMs(backoff: Backoff, retry: number): number {
  const n = retry > 0 ? retry : 0;
  return Math.min(backoff.maxTimeout, backoff.minTimeout * backoff.factor ** n);
}

/** A fixed wait of `ms` between attempts. */
export function fixedBackoff(ms: number): Backoff {
  return { minTimeout: ms, factor: 1, maxTimeout: ms };
}
