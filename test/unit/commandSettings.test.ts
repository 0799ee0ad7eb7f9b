import { describe, expect, it } from 'vitest';
import { SETTINGS, loadConfig, type SettingName } from '../../src/config.js';
import * as lists from '../../src/bin/commandSettings.js';
import { resolveWorkerConfig } from '../../src/bin/workerSettings.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const COMMAND_LISTS = Object.entries(lists).filter(([name]) => name.endsWith('_SETTINGS')) as [string, readonly SettingName[]][];

describe("a command's settings list", () => {
  it.each(COMMAND_LISTS)('%s is what loadConfig returns for it, no setting more', (_, names) => {
    expect(Object.keys(loadConfig({}, {}, names)).sort()).toEqual([...new Set(names)].sort());
  });

  it('types the configuration as exactly its settings', () => {
    const config = loadConfig({}, {}, lists.DEAD_LETTERS_SETTINGS);
    expect(config.subjectPrefix).toBe('');
    // @ts-expect-error dead-letters does not read the health port, so its configuration has none.
    expect(config.healthPort).toBeUndefined();
  });

  it("of the sandbox is the worker's but the two it decides itself", () => {
    expect(lists.WORKER_SETTINGS.filter((name) => !(lists.SANDBOX_SETTINGS as readonly string[]).includes(name))).toEqual(['schemaMode', 'healthPort']);
  });
});

describe('startWorker', () => {
  it("fills each setting an in-process caller leaves out with the settings table's default, and keeps what it gives", () => {
    const config = resolveWorkerConfig({ ...testWorkerConfig('p.'), dispatchPollMs: 75, queueMaxPerSession: undefined });
    expect(config).toMatchObject({
      subjectPrefix: 'p.',
      dispatchPollMs: 75,
      queueMaxPerSession: SETTINGS.queueMaxPerSession.default,
      reservationTtlMs: SETTINGS.reservationTtlMs.default,
      promptDispatchConcurrency: SETTINGS.promptDispatchConcurrency.default,
      natsInboxPrefix: SETTINGS.natsInboxPrefix.default,
      schemaMode: SETTINGS.schemaMode.default,
    });
    expect(config.natsUrl).toBeUndefined();
  });
});
