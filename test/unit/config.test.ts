import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { describeSettings } from '../../src/describeSettings.js';

const batchSize = (flags: Record<string, string>, env: Record<string, string>) => loadConfig(flags, env, ['projectionBatchSize']).projectionBatchSize;

function problemsOf(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems.join('\n');
  }
  throw new Error('expected a ConfigError');
}

describe('the projection batch size setting and its alias CONCURRENCY', () => {
  it('reads PROJECTION_BATCH_SIZE / --projection-batch-size, default 16', () => {
    expect(batchSize({}, {})).toBe(16);
    expect(batchSize({}, { PROJECTION_BATCH_SIZE: '4' })).toBe(4);
    expect(batchSize({ 'projection-batch-size': '5' }, { PROJECTION_BATCH_SIZE: '4' })).toBe(5);
  });

  it('still accepts CONCURRENCY / --concurrency when the new name is not given', () => {
    expect(batchSize({}, { CONCURRENCY: '3' })).toBe(3);
    expect(batchSize({ concurrency: '7' }, {})).toBe(7);
  });

  it('lets the new name win over the alias from the same source, and a flag win over the environment', () => {
    expect(batchSize({}, { CONCURRENCY: '3', PROJECTION_BATCH_SIZE: '4' })).toBe(4);
    expect(batchSize({ concurrency: '7', 'projection-batch-size': '5' }, {})).toBe(5);
    expect(batchSize({ concurrency: '7' }, { PROJECTION_BATCH_SIZE: '4' })).toBe(7);
  });

  it('names both ways to set it, and where the bad value came from, in a config error and in the help', () => {
    const problems = problemsOf(() => loadConfig({}, { CONCURRENCY: '0' }, ['projectionBatchSize']));
    expect(problems).toContain('PROJECTION_BATCH_SIZE / --projection-batch-size (alias CONCURRENCY / --concurrency) = "0" (from CONCURRENCY)');
    expect(problemsOf(() => loadConfig({ 'projection-batch-size': 'x' }, {}, ['projectionBatchSize']))).toContain('(from --projection-batch-size)');
    const help = describeSettings(['projectionBatchSize']);
    for (const name of ['--projection-batch-size', 'PROJECTION_BATCH_SIZE', '--concurrency', 'CONCURRENCY']) expect(help).toContain(name);
  });
});

describe('the admission settings', () => {
  const admission = (env: Record<string, string>) => loadConfig({}, env, ['admissionLockTimeoutMs', 'turnStartHookSubject', 'turnStartHookTimeoutMs']);

  it('default to a 5 s lock timeout, no turn-start hook and a 30 s hook timeout', () => {
    expect(admission({})).toEqual({ admissionLockTimeoutMs: 5_000, turnStartHookSubject: '', turnStartHookTimeoutMs: 30_000 });
  });

  it('read ADMISSION_LOCK_TIMEOUT_MS, TURN_START_HOOK_SUBJECT and TURN_START_HOOK_TIMEOUT_MS', () => {
    expect(admission({ ADMISSION_LOCK_TIMEOUT_MS: '250', TURN_START_HOOK_SUBJECT: 'kandev.turn_start', TURN_START_HOOK_TIMEOUT_MS: '1000' })).toEqual({
      admissionLockTimeoutMs: 250,
      turnStartHookSubject: 'kandev.turn_start',
      turnStartHookTimeoutMs: 1000,
    });
  });

  it('refuses a hook subject with a wildcard, a space or an empty token, naming the variable', () => {
    for (const subject of ['kandev.*', 'kandev.>', 'turn start', 'kandev..start', '.start', 'start.']) {
      expect(problemsOf(() => admission({ TURN_START_HOOK_SUBJECT: subject }))).toContain('TURN_START_HOOK_SUBJECT / --turn-start-hook-subject');
    }
  });

  it('refuses a PostgreSQL pool of one connection, naming DB_MAX_CONNECTIONS and saying why it needs two', () => {
    const problems = problemsOf(() => loadConfig({}, { DB_MAX_CONNECTIONS: '1' }, ['dbMaxConnections']));
    expect(problems).toContain('DB_MAX_CONNECTIONS / --db-max-connections = "1" (from DB_MAX_CONNECTIONS)');
    expect(problems).toContain('at least 2');
  });
});
