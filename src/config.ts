import { z } from 'zod';
import { DEFAULT_DATABASE_URL } from './repository/database.js';
import { ERROR_CODES, PendingProjectorError } from './errors.js';
import { BUCKET_STORAGES } from './events/summaryBucket.js';
import { SCHEMA_MODE_SETTINGS } from './repository/schema/schemaMode.js';
import { TIMESTAMP_FORM_SETTINGS } from './repository/timestampForms.js';

/**
 * The one reader of process.env. Every setting has an env name and a flag; a flag wins over the
 * environment, the environment over the default. A renamed setting keeps its old env name and flag
 * as an `alias`; the new name wins over the alias from the same source.
 */

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const PREFIX = /^([A-Za-z0-9_-]+\.)*$/;
/** Empty, or NATS subject tokens: no spaces, no wildcards, no empty token. */
const HOOK_SUBJECT = /^([^.*>\s]+(\.[^.*>\s]+)*)?$/;

const intFrom = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const SETTINGS = {
  databaseUrl: {
    env: 'DATABASE_URL',
    flag: 'database-url',
    schema: z.string().min(1),
    default: DEFAULT_DATABASE_URL,
    help: 'sqlite:<path>, sqlite::memory: or postgres://user@host:port/db; TLS with ?sslmode=require|verify-ca|verify-full&sslrootcert=<CA file> (libpq meaning)',
  },
  databasePasswordFile: {
    env: 'DATABASE_PASSWORD_FILE',
    flag: 'database-password-file',
    schema: z.string(),
    default: '',
    help: 'file holding the PostgreSQL password (one trailing newline ignored), for a DATABASE_URL without one; empty: the URL\'s password, else PGPASSWORD',
  },
  natsUrl: { env: 'NATS_URL', flag: 'nats-url', schema: z.string().min(1), default: 'nats://127.0.0.1:4222', help: 'NATS server(s), comma separated' },
  subjectPrefix: { env: 'SUBJECT_PREFIX', flag: 'subject-prefix', schema: z.string().regex(PREFIX, 'must be empty or dot-terminated tokens, e.g. "acme."'), default: '', help: 'prefix for every subject, stream, consumer and bucket (e.g. "acme.")' },
  healthPort: { env: 'HEALTH_PORT', flag: 'health-port', schema: intFrom(0, 65535), default: 9464, help: 'HTTP port for /healthz, /readyz, /metrics (0 picks a free port)' },
  logLevel: { env: 'LOG_LEVEL', flag: 'log-level', schema: z.enum(LOG_LEVELS), default: 'info', help: LOG_LEVELS.join(' | ') },
  shutdownTimeoutMs: { env: 'SHUTDOWN_TIMEOUT_MS', flag: 'shutdown-timeout-ms', schema: intFrom(100, 600_000), default: 30_000, help: 'graceful shutdown budget before exiting non-zero' },
  projectionBatchSize: {
    env: 'PROJECTION_BATCH_SIZE',
    flag: 'projection-batch-size',
    // The setting's first name, still accepted; the new name wins when both are given.
    alias: { env: 'CONCURRENCY', flag: 'concurrency' },
    schema: intFrom(1, 1024),
    default: 16,
    help: 'tasks one projection transaction takes at most; (DB_MAX_CONNECTIONS + 1) x this many are in flight (SQLite: 2 x this many)',
  },
  projectionTransactions: {
    env: 'PROJECTION_TRANSACTIONS',
    flag: 'projection-transactions',
    schema: intFrom(1, 200),
    default: 1,
    help: 'projection transactions reading and publishing at once on PostgreSQL (at most the pool); tasks due meanwhile share the next one; commits overlap either way (SQLite: always 1)',
  },
  maxEventBytes: { env: 'MAX_EVENT_BYTES', flag: 'max-event-bytes', schema: intFrom(1024, 64 * 1024 * 1024), default: 256 * 1024, help: 'larger events are dead-lettered' },
  maxDeliver: { env: 'MAX_DELIVER', flag: 'max-deliver', schema: intFrom(2, 1000), default: 10, help: 'deliveries before JetStream gives up on an event (then it is dead-lettered)' },
  ackWaitMs: { env: 'ACK_WAIT_MS', flag: 'ack-wait-ms', schema: intFrom(1000, 3_600_000), default: 30_000, help: 'redelivery timeout for an unacknowledged event' },
  streamMaxAgeMs: { env: 'STREAM_MAX_AGE_MS', flag: 'stream-max-age-ms', schema: intFrom(60_000, 365 * 86_400_000), default: 7 * 86_400_000, help: 'how long the event stream keeps events for replay' },
  reconcilePageSize: { env: 'RECONCILE_PAGE_SIZE', flag: 'reconcile-page-size', schema: intFrom(1, 10_000), default: 500, help: 'tasks per keyset page in reconcile and verify' },
  bootReconcile: { env: 'BOOT_RECONCILE', flag: 'boot-reconcile', schema: z.enum(['true', 'false']).transform((v) => v === 'true'), default: 'true', help: 'reconcile every task at worker start (true | false)' },
  dbMaxConnections: {
    env: 'DB_MAX_CONNECTIONS',
    flag: 'db-max-connections',
    schema: intFrom(2, 200),
    default: 10,
    help:
      'PostgreSQL pool size, at least 2: a comment-bearing send holds one connection for its admission advisory lock while its turn-start hook and accepting transaction use others ' +
      '(at most this - 1 locks are held at once; SQLite always uses one writer)',
  },
  admissionLockTimeoutMs: {
    env: 'ADMISSION_LOCK_TIMEOUT_MS',
    flag: 'admission-lock-timeout-ms',
    schema: intFrom(1, 600_000),
    default: 5_000,
    help:
      "how long a send or plan-comment change waits for its task's admission lease (in-process, then PostgreSQL lock_timeout) before replying unavailable; " +
      "kept under the typed client's 10 s request timeout, so the wait ends with a reply before the caller gives up",
  },
  turnStartHookSubject: {
    env: 'TURN_START_HOOK_SUBJECT',
    flag: 'turn-start-hook-subject',
    schema: z.string().regex(HOOK_SUBJECT, 'must be empty or dot-separated tokens without spaces or wildcards, e.g. "kandev.turn_start"'),
    default: '',
    help: 'subject (after SUBJECT_PREFIX) of the turn-start hook, a request/reply call made inside the admission lease before a prompt is accepted; its reply must be {"ok": true}. Empty: no hook, no call',
  },
  turnStartHookTimeoutMs: {
    env: 'TURN_START_HOOK_TIMEOUT_MS',
    flag: 'turn-start-hook-timeout-ms',
    schema: intFrom(100, 600_000),
    default: 30_000,
    help: "how long the turn-start hook may take; no reply by then replies unavailable. The task's admission lease is held meanwhile",
  },
  summaryBucketStorage: {
    env: 'SUMMARY_BUCKET_STORAGE',
    flag: 'summary-bucket-storage',
    schema: z.enum(BUCKET_STORAGES),
    default: 'memory',
    help: 'storage of the KV bucket of latest summaries, when it is created: memory (refilled from the database after a NATS restart) | file',
  },
  schemaMode: {
    env: 'SCHEMA_MODE',
    flag: 'schema-mode',
    schema: z.enum(SCHEMA_MODE_SETTINGS),
    default: 'auto',
    help:
      "who owns the schema: auto (Kandev's tables exist: kandev; an empty database: owned) | owned (this service creates Kandev's tables; refused where they exist) | " +
      'kandev (only this service\'s own objects beside Kandev\'s tables; refused where one the service reads is missing)',
  },
  timestampForm: {
    env: 'TIMESTAMP_FORM',
    flag: 'timestamp-form',
    schema: z.enum(TIMESTAMP_FORM_SETTINGS),
    default: 'auto',
    help: "timestamp text written into Kandev's SQLite tables: auto (the form the newest rows use), canonical (2026-08-20T10:00:00.500000000Z) or kandev (2026-08-20 10:00:00.5+00:00); PostgreSQL stores instants either way",
  },
  respondDeadlineMs: { env: 'RESPOND_DEADLINE_MS', flag: 'respond-deadline-ms', schema: intFrom(100, 600_000), default: 30_000, help: 'how long clarification.respond waits for the live waiter to confirm, or for the resume stream to acknowledge a detached resume' },
} as const;

type Settings = typeof SETTINGS;
export type SettingName = keyof Settings;
export type Config = { [K in SettingName]: z.output<Settings[K]['schema']> };

interface SettingNames {
  env: string;
  flag: string;
}

/** The setting's own env name and flag, then its alias's if it has one. */
export function namesOf(name: SettingName): SettingNames[] {
  const setting: SettingNames & { alias?: SettingNames } = SETTINGS[name];
  return setting.alias ? [setting, setting.alias] : [setting];
}

/** "ENV / --flag", with the alias: "ENV / --flag (alias OLD_ENV / --old-flag)". */
function describeNames(name: SettingName): string {
  const [own, alias] = namesOf(name);
  return `${own!.env} / --${own!.flag}${alias ? ` (alias ${alias.env} / --${alias.flag})` : ''}`;
}

export class ConfigError extends PendingProjectorError {
  override name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(ERROR_CODES.CONFIG_INVALID, `invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/**
 * Builds the configuration from flags (already parsed, keyed by flag name) and an environment.
 * Lists every bad setting at once, each with both ways to set it.
 */
export function loadConfig(
  flags: Record<string, string | boolean | undefined> = {},
  env: NodeJS.ProcessEnv = process.env,
  only: readonly SettingName[] = Object.keys(SETTINGS) as SettingName[],
): Config {
  const problems: string[] = [];
  const config: Record<string, unknown> = {};
  for (const name of only) {
    const setting = SETTINGS[name];
    const names = namesOf(name);
    const fromFlag = names.find((n) => flags[n.flag] !== undefined);
    const fromEnv = names.find((n) => env[n.env] !== undefined);
    const raw = fromFlag ? String(flags[fromFlag.flag]) : fromEnv ? env[fromEnv.env]! : String(setting.default);
    const parsed = (setting.schema as z.ZodType).safeParse(raw);
    if (parsed.success) config[name] = parsed.data;
    else {
      const source = fromFlag ? `--${fromFlag.flag}` : fromEnv ? fromEnv.env : 'default';
      problems.push(`${describeNames(name)} = ${JSON.stringify(raw)} (from ${source}): ${parsed.error.issues.map((i) => i.message).join('; ')}. Expected ${setting.help}.`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config as Config;
}

/** Help lines for the settings a command uses. */
export function describeSettings(only: readonly SettingName[]): string {
  return only
    .map((name) => {
      const s = SETTINGS[name];
      const alias = namesOf(name)[1];
      const aka = alias ? `; alias --${alias.flag} / ${alias.env}` : '';
      return `  --${s.flag.padEnd(22)} ${s.env.padEnd(22)} ${s.help} (default: ${JSON.stringify(s.default)}${aka})`;
    })
    .join('\n');
}
