import { loadConfig, withDefaults, type Config, type SettingName } from '../config.js';
import { DB_SETTINGS, WORKER_SETTINGS, type WorkerSettings } from './commandSettings.js';
import { NATS_CLIENT_SETTINGS } from './natsConnectionOptions.js';

/** The worker command's settings that its caller acts on: it opens the connections and keeps the shutdown budget. */
const CALLERS_SETTINGS = [...DB_SETTINGS, ...NATS_CLIENT_SETTINGS, 'shutdownTimeoutMs'] as const satisfies readonly SettingName[];
type FromWorkerSettings = Exclude<(typeof WORKER_SETTINGS)[number], (typeof CALLERS_SETTINGS)[number]>;
/** What `startWorker` reads: the worker command's other settings, and the inbox prefix of the connection it is handed (its permission probe asks for it). */
type StartWorkerSetting = FromWorkerSettings | 'natsInboxPrefix';
const START_WORKER_SETTINGS: readonly StartWorkerSetting[] = [
  ...WORKER_SETTINGS.filter((name): name is FromWorkerSettings => !(CALLERS_SETTINGS as readonly SettingName[]).includes(name)),
  'natsInboxPrefix',
];

/**
 * The configuration `startWorker` runs with, every setting it reads filled in; the NATS URL only
 * when known (the start's log line names it; without it, the server the connection reached).
 */
export type StartWorkerSettings = Pick<Config, StartWorkerSetting> & Partial<Pick<Config, 'natsUrl'>>;

/** The settings an in-process caller (a test, an embedder) of `startWorker` must give; it may leave out the others. */
type GivenSetting =
  | 'subjectPrefix'
  | 'healthPort'
  | 'projectionBatchSize'
  | 'projectionTransactions'
  | 'maxEventBytes'
  | 'maxDeliver'
  | 'ackWaitMs'
  | 'streamMaxAgeMs'
  | 'reconcilePageSize'
  | 'bootReconcile'
  | 'respondDeadlineMs';

/** What `startWorker` takes: the given settings, and any other it reads; one left out takes the table's default. */
export type WorkerConfig = Pick<StartWorkerSettings, GivenSetting> & Partial<StartWorkerSettings>;

/** `config` with every setting `startWorker` reads and `config` leaves out set to the table's default (config.ts). */
export function resolveWorkerConfig(config: WorkerConfig): StartWorkerSettings {
  return withDefaults(config, START_WORKER_SETTINGS);
}

/**
 * A worker configuration for in-process callers (the demo, the sandbox): the CLI's defaults, under
 * `env`, under `overrides`. Built by the one config loader, so a new or renamed setting reaches
 * them as it reaches `pending-projector worker`.
 */
export function workerConfigFrom(env: NodeJS.ProcessEnv, overrides: Partial<WorkerSettings> = {}): WorkerSettings {
  return { ...loadConfig({}, env, WORKER_SETTINGS), ...overrides };
}
