import { describe, expect, it } from 'vitest';
import { backoffDelayMs, fixedBackoff, type Backoff } from '../../src/background/backoff.js';

const doubling: Backoff = { minTimeout: 250, factor: 2, maxTimeout: 60_000 };

describe('backoffDelayMs', () => {
  it('grows by the factor from the first wait up to the longest', () => {
    expect([0, 1, 2, 3, 7, 8, 100, 10_000].map((n) => backoffDelayMs(doubling, n))).toEqual([250, 500, 1000, 2000, 32_000, 60_000, 60_000, 60_000]);
  });

  it('counts a negative or missing retry number as the first', () => {
    expect([-1, Number.NaN].map((n) => backoffDelayMs(doubling, n))).toEqual([250, 250]);
  });

  it('waits the same between every attempt when fixed', () => {
    expect([0, 1, 5].map((n) => backoffDelayMs(fixedBackoff(5000), n))).toEqual([5000, 5000, 5000]);
  });
});
