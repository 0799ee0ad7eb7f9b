import type { SettingName, SettingsOf } from '../config.js';
import { NATS_CLIENT_SETTINGS } from './natsConnectionOptions.js';

/**
 * The settings of every command, one list each: cli.ts declares a command's flags and loads its
 * configuration from the list, and the command takes the list's type (`SettingsOf`), so a setting
 * the command reads but does not list is a type error, and one it lists is a flag. A list's order is
 * the order of the command's `--help`.
 */

/** The settings every command that opens the database reads. */
export const DB_SETTINGS = ['databaseUrl', 'databasePasswordFile', 'logLevel', 'logFormat', 'dbMaxConnections'] as const satisfies readonly SettingName[];
/** The settings every command that connects to NATS reads. */
export const BUS_SETTINGS = [...NATS_CLIENT_SETTINGS, 'subjectPrefix'] as const satisfies readonly SettingName[];
/** Commands that read or write Kandev's rows (everything but migrate and dead-letters). */
export const STORE_SETTINGS = [...DB_SETTINGS, 'timestampForm'] as const satisfies readonly SettingName[];

/** What the worker reads beside the connections' settings. */
export const WORKER_ONLY_SETTINGS = [
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
  'streamReplicas',
  'admissionLockTimeoutMs',
  'turnStartHookSubject',
  'turnStartHookTimeoutMs',
  'reservationTtlMs',
  'promptDeadlineMs',
  'dispatchPollMs',
  'promptDispatchConcurrency',
  'queueMaxPerSession',
] as const satisfies readonly SettingName[];

/** `pending-projector worker`. */
export const WORKER_SETTINGS = [...STORE_SETTINGS, ...BUS_SETTINGS, ...WORKER_ONLY_SETTINGS] as const;
export type WorkerSettings = SettingsOf<typeof WORKER_SETTINGS>;

/** The worker settings the sandbox decides itself: a free health port and its own schema. */
type SandboxDecides = 'healthPort' | 'schemaMode';
const SANDBOX_DECIDES: readonly SettingName[] = ['healthPort', 'schemaMode'] satisfies SandboxDecides[];

/** `pending-projector sandbox`: the worker's settings but the two it decides itself. */
export const SANDBOX_SETTINGS = WORKER_SETTINGS.filter(
  (name): name is Exclude<(typeof WORKER_SETTINGS)[number], SandboxDecides> => !SANDBOX_DECIDES.includes(name),
);
export type SandboxSettings = SettingsOf<typeof SANDBOX_SETTINGS>;

/** `pending-projector sandbox request` and `sandbox watch`: a NATS connection alone. */
export const SANDBOX_CLIENT_SETTINGS = [...BUS_SETTINGS] as const;
export type SandboxClientSettings = SettingsOf<typeof SANDBOX_CLIENT_SETTINGS>;

/** `pending-projector migrate`. */
export const MIGRATE_SETTINGS = [...STORE_SETTINGS, 'schemaMode'] as const satisfies readonly SettingName[];
export type MigrateSettings = SettingsOf<typeof MIGRATE_SETTINGS>;

/** `pending-projector doctor`: the database alone, read-only, with no pool to size and no log. */
export const DOCTOR_SETTINGS = ['databaseUrl', 'databasePasswordFile', 'schemaMode'] as const satisfies readonly SettingName[];
export type DoctorSettings = SettingsOf<typeof DOCTOR_SETTINGS>;

/** `pending-projector reconcile`. */
export const RECONCILE_SETTINGS = [
  ...STORE_SETTINGS,
  ...BUS_SETTINGS,
  'schemaMode',
  'reconcilePageSize',
  'projectionBatchSize',
  'projectionTransactions',
  'summaryBucketStorage',
  'streamReplicas',
  // Cancelling the queues of finished sessions: a mutation under the admission lock, and the event's `max`.
  'admissionLockTimeoutMs',
  'queueMaxPerSession',
] as const satisfies readonly SettingName[];
export type ReconcileSettings = SettingsOf<typeof RECONCILE_SETTINGS>;

/** `pending-projector verify`: the database alone (a dry run publishes nothing). */
export const VERIFY_SETTINGS = [...STORE_SETTINGS, 'reconcilePageSize'] as const satisfies readonly SettingName[];
export type VerifySettings = SettingsOf<typeof VERIFY_SETTINGS>;

/** `pending-projector replay`. */
export const REPLAY_SETTINGS = [
  ...STORE_SETTINGS,
  ...BUS_SETTINGS,
  'schemaMode',
  'projectionBatchSize',
  'projectionTransactions',
  'summaryBucketStorage',
  'streamReplicas',
] as const satisfies readonly SettingName[];
export type ReplaySettings = SettingsOf<typeof REPLAY_SETTINGS>;

/** `pending-projector dead-letters`: NATS alone, and the log settings of a failure's report. */
export const DEAD_LETTERS_SETTINGS = [...BUS_SETTINGS, 'logLevel', 'logFormat'] as const satisfies readonly SettingName[];
export type DeadLettersSettings = SettingsOf<typeof DEAD_LETTERS_SETTINGS>;

/** `pending-projector console`: the page's server, and what the page is told to connect to (the browser holds the NATS credentials). */
export const CONSOLE_SETTINGS = ['consolePort', 'consoleHost', 'consoleNatsUrl', 'subjectPrefix'] as const satisfies readonly SettingName[];
export type ConsoleSettings = SettingsOf<typeof CONSOLE_SETTINGS>;
