import { loadConfig, type Config, type SettingName } from '../config.js';
import { NATS_CLIENT_SETTINGS } from './natsConnectionOptions.js';

/** The settings every command that opens the database reads. */
const DB_SETTINGS: SettingName[] = ['databaseUrl', 'databasePasswordFile', 'logLevel', 'logFormat', 'dbMaxConnections'];
/** The settings every command that connects to NATS reads. */
export const BUS_SETTINGS: SettingName[] = [...NATS_CLIENT_SETTINGS, 'subjectPrefix'];
/** Commands that read or write Kandev's rows (everything but migrate and dead-letters). */
export const STORE_SETTINGS: SettingName[] = [...DB_SETTINGS, 'timestampForm'];

/** What `startWorker` reads, beside the connections: one list, so the CLI and in-process callers cannot drift. */
const WORKER_ONLY_SETTINGS: SettingName[] = [
  'schemaMode',
  'healthPort',
  'shutdownTimeoutMs',
  'projectionBatchSize',
  'projectionTransactions',
  'maxEventBytes',
  'maxDeliver',
  'ackWaitMs',
  'streamMaxAgeMs',
  'reconcilePageSize',
  'bootReconcile',
  'respondDeadlineMs',
  'summaryBucketStorage',
  'admissionLockTimeoutMs',
  'turnStartHookSubject',
  'turnStartHookTimeoutMs',
  'reservationTtlMs',
  'promptDeadlineMs',
  'dispatchPollMs',
  'queueMaxPerSession',
  'failpoints',
];

/** Every setting of `pending-projector worker`. */
export const WORKER_SETTINGS: SettingName[] = [...STORE_SETTINGS, ...BUS_SETTINGS, ...WORKER_ONLY_SETTINGS];

/**
 * A worker configuration for in-process callers (the demo, the sandbox): the CLI's defaults, under
 * `env`, under `overrides`. Built by the one config loader, so a new or renamed setting reaches
 * them as it reaches `pending-projector worker`.
 */
export function workerConfigFrom(env: NodeJS.ProcessEnv, overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({}, env, WORKER_SETTINGS), ...overrides };
}
