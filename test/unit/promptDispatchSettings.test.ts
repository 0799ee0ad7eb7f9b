import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { NO_FAILPOINTS } from '../../src/failpoints.js';
import { releaseBackoffMs } from '../../src/services/prompts/promptDispatcher.js';
import { instantAfter } from '../../src/timestamps.js';
import { createFailpoints } from '../support/failpoints.js';

const SETTINGS = ['reservationTtlMs', 'promptDeadlineMs', 'dispatchPollMs', 'promptDispatchConcurrency', 'queueMaxPerSession'] as const;

describe('the prompt dispatcher settings', () => {
  it('default to a 30 s reservation, a 10 s prompt deadline, a 1 s poll, 4 sessions at once and 10 queued prompts', () => {
    expect(loadConfig({}, {}, SETTINGS)).toEqual({
      reservationTtlMs: 30_000,
      promptDeadlineMs: 10_000,
      dispatchPollMs: 1_000,
      promptDispatchConcurrency: 4,
      queueMaxPerSession: 10,
    });
  });

  it('read their env names and flags, the flag winning', () => {
    const env = {
      RESERVATION_TTL_MS: '1500',
      PROMPT_DEADLINE_MS: '2000',
      DISPATCH_POLL_MS: '50',
      PROMPT_DISPATCH_CONCURRENCY: '2',
      QUEUE_MAX_PER_SESSION: '3',
    };
    expect(loadConfig({ 'dispatch-poll-ms': '75' }, env, SETTINGS)).toEqual({
      reservationTtlMs: 1500,
      promptDeadlineMs: 2000,
      dispatchPollMs: 75,
      promptDispatchConcurrency: 2,
      queueMaxPerSession: 3,
    });
  });

  it('refuse a queue limit outside 1..1000, naming both ways to set it', () => {
    let problems = '';
    try {
      loadConfig({}, { QUEUE_MAX_PER_SESSION: '0' }, SETTINGS);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      problems = (err as ConfigError).problems.join('\n');
    }
    expect(problems).toContain('QUEUE_MAX_PER_SESSION / --queue-max-per-session');
  });

  it('take the dispatch concurrency from its flag over its env name, 1 and 64 included', () => {
    expect(loadConfig({ 'prompt-dispatch-concurrency': '1' }, { PROMPT_DISPATCH_CONCURRENCY: '64' }, SETTINGS).promptDispatchConcurrency).toBe(1);
    expect(loadConfig({}, { PROMPT_DISPATCH_CONCURRENCY: '64' }, SETTINGS).promptDispatchConcurrency).toBe(64);
  });

  it.each(['0', '65', '2.5', 'four', ''])('refuse a dispatch concurrency of %j, naming both ways to set it and the range', (raw) => {
    let problems = '';
    try {
      loadConfig({}, { PROMPT_DISPATCH_CONCURRENCY: raw }, SETTINGS);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      problems = (err as ConfigError).problems.join('\n');
    }
    expect(problems).toContain(`PROMPT_DISPATCH_CONCURRENCY / --prompt-dispatch-concurrency = ${JSON.stringify(raw)} (from PROMPT_DISPATCH_CONCURRENCY)`);
    expect(problems).toContain('1 to 64');
  });
});

describe('the test failpoints', () => {
  const silent = pino({ level: 'silent' });

  it('are a no-op unless armed', async () => {
    expect(createFailpoints('', silent)).toBe(NO_FAILPOINTS);
    await expect(createFailpoints('after_publish=hang', silent).reach('after_reserve')).resolves.toBeUndefined();
  });

  it('refuse an unknown name or action, so a typo never passes silently', () => {
    expect(() => createFailpoints('after_reserv=hang', silent)).toThrow(/unknown failpoint/);
    expect(() => createFailpoints('after_reserve=crash', silent)).toThrow(/unknown failpoint/);
  });

  it('hang at an armed name: the promise stays pending, while another name of the same set resolves', async () => {
    const failpoints = createFailpoints('after_reserve=hang', silent);
    // Settled after a macrotask turn or not at all: a resolved promise's callbacks run before setImmediate's.
    const settledSoon = async (promise: Promise<void>) => {
      let settled = false;
      void promise.then(() => (settled = true));
      await new Promise((resolve) => setImmediate(resolve));
      return settled;
    };
    expect(await settledSoon(failpoints.reach('after_publish'))).toBe(true);
    expect(await settledSoon(failpoints.reach('after_reserve'))).toBe(false);
  });
});

describe('the release backoff', () => {
  it('is min(60 s, 250 ms * 2^attempts)', () => {
    expect([0, 1, 2, 3, 7, 8, 100].map(releaseBackoffMs)).toEqual([250, 500, 1000, 2000, 32_000, 60_000, 60_000]);
  });
});

describe('instantAfter', () => {
  it('adds milliseconds to a canonical instant, at microsecond precision', () => {
    expect(instantAfter('2026-12-01T10:00:00.000000000Z', 1500)).toBe('2026-12-01T10:00:01.500000000Z');
    expect(instantAfter('2026-12-01T23:59:59.999999000Z', 0.001)).toBe('2026-12-02T00:00:00.000000000Z');
  });
});
