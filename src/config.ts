import { z } from 'zod';
import { ERROR_CODES, PendingProjectorError } from './errors.js';
import { BUCKET_STORAGES } from './events/summaryBucket.js';
import { DEFAULT_DATABASE_URL, SCHEMA_MODE_SETTINGS, TIMESTAMP_FORM_SETTINGS } from './settingValues.js';
import { redactCredentials } from './redaction.js';
import { LOG_FORMAT_SETTINGS } from './logger.js';

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
/** A path, or empty for "not set". */
const optionalPath = z.string();
/** An inbox prefix: subject tokens without wildcards or spaces (nats.js appends `.<nuid>`). */
const INBOX_PREFIX = /^[^.*>\s]+(\.[^.*>\s]+)*$/;
/** A secret given inline: one line (a newline pasted with it would be sent as part of it). */
const inlineSecret = z.string().regex(/^[^\r\n]*$/, 'must be one line; put a multi-line secret in its _FILE setting');

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
    help: "file holding the PostgreSQL password (one trailing newline ignored), for a DATABASE_URL without one; empty: the URL's password, else PGPASSWORD",
  },
  natsUrl: {
    env: 'NATS_URL',
    flag: 'nats-url',
    schema: z.string().min(1),
    default: 'nats://127.0.0.1:4222',
    help: 'NATS server(s), comma separated: nats://host:port, or tls://host:port to require TLS; nats://user:password@host or nats://token@host carry credentials',
  },
  // NATS authentication: at most one of a token, a user and password, an NKey seed or a credentials
  // (JWT) file. Secret values are never echoed (`secret: true`); each has a _FILE twin, so the secret
  // need not sit in the environment (or in `ps` as a flag) at all.
  natsToken: {
    env: 'NATS_TOKEN',
    flag: 'nats-token',
    schema: inlineSecret,
    default: '',
    secret: true,
    help: 'token for NATS token authentication (prefer NATS_TOKEN_FILE)',
  },
  natsTokenFile: {
    env: 'NATS_TOKEN_FILE',
    flag: 'nats-token-file',
    schema: optionalPath,
    default: '',
    help: 'file holding the NATS token (reread at every reconnect)',
  },
  natsUser: { env: 'NATS_USER', flag: 'nats-user', schema: z.string(), default: '', help: 'NATS user name for user/password authentication' },
  natsPassword: {
    env: 'NATS_PASSWORD',
    flag: 'nats-password',
    schema: inlineSecret,
    default: '',
    secret: true,
    help: 'password of NATS_USER (prefer NATS_PASSWORD_FILE)',
  },
  natsPasswordFile: {
    env: 'NATS_PASSWORD_FILE',
    flag: 'nats-password-file',
    schema: optionalPath,
    default: '',
    help: 'file holding the password of NATS_USER (reread at every reconnect)',
  },
  natsNkeySeedFile: {
    env: 'NATS_NKEY_SEED_FILE',
    flag: 'nats-nkey-seed-file',
    schema: optionalPath,
    default: '',
    help: 'file holding an NKey user seed (SU...) for NKey authentication',
  },
  natsCredsFile: {
    env: 'NATS_CREDS_FILE',
    flag: 'nats-creds-file',
    schema: optionalPath,
    default: '',
    help: 'NATS credentials file (user JWT and seed) for decentralised JWT authentication',
  },
  natsTlsCaFile: {
    env: 'NATS_TLS_CA_FILE',
    flag: 'nats-tls-ca-file',
    schema: optionalPath,
    default: '',
    help: 'PEM file of the CA(s) that signed the NATS server certificate; setting any NATS_TLS_* file requires TLS',
  },
  natsTlsCertFile: {
    env: 'NATS_TLS_CERT_FILE',
    flag: 'nats-tls-cert-file',
    schema: optionalPath,
    default: '',
    help: 'PEM client certificate for NATS servers that verify clients (with NATS_TLS_KEY_FILE)',
  },
  natsTlsKeyFile: { env: 'NATS_TLS_KEY_FILE', flag: 'nats-tls-key-file', schema: optionalPath, default: '', help: 'PEM private key of NATS_TLS_CERT_FILE' },
  natsInboxPrefix: {
    env: 'NATS_INBOX_PREFIX',
    flag: 'nats-inbox-prefix',
    schema: z.string().regex(INBOX_PREFIX, 'must be dot-separated subject tokens without wildcards or spaces, e.g. "_INBOX_worker"'),
    default: '_INBOX',
    help: "subject prefix of this process's reply inboxes; a per-user prefix (deploy/nats: _INBOX_worker, _INBOX_ops) keeps other users from reading its replies",
  },
  subjectPrefix: {
    env: 'SUBJECT_PREFIX',
    flag: 'subject-prefix',
    schema: z.string().regex(PREFIX, 'must be empty or dot-terminated tokens, e.g. "acme."'),
    default: '',
    help: 'prefix for every subject, stream, consumer and bucket (e.g. "acme.")',
  },
  healthPort: {
    env: 'HEALTH_PORT',
    flag: 'health-port',
    schema: intFrom(0, 65535),
    default: 9464,
    help: 'HTTP port for /healthz, /readyz, /metrics (0 picks a free port)',
  },
  consolePort: {
    env: 'CONSOLE_PORT',
    flag: 'console-port',
    schema: intFrom(0, 65535),
    default: 9465,
    help: 'HTTP port of the console page (0 picks a free port)',
  },
  consoleHost: { env: 'CONSOLE_HOST', flag: 'console-host', schema: z.string().min(1), default: '127.0.0.1', help: 'address the console page listens on' },
  consoleNatsUrl: {
    env: 'CONSOLE_NATS_URL',
    flag: 'console-nats-url',
    schema: z.string().regex(/^wss?:\/\/\S+$/, 'must be a ws:// or wss:// URL, e.g. "ws://127.0.0.1:8080"'),
    default: 'ws://127.0.0.1:8080',
    help: "the NATS WebSocket listener the BROWSER connects to (nats-server's websocket block), comma separated; ws:// or wss://",
  },
  logLevel: { env: 'LOG_LEVEL', flag: 'log-level', schema: z.enum(LOG_LEVELS), default: 'info', help: LOG_LEVELS.join(' | ') },
  logFormat: {
    env: 'LOG_FORMAT',
    flag: 'log-format',
    schema: z.enum(LOG_FORMAT_SETTINGS),
    default: 'auto',
    help: 'auto (pretty when stdout is a terminal, else json) | json (one JSON object a line) | pretty (human-readable text)',
  },
  shutdownTimeoutMs: {
    env: 'SHUTDOWN_TIMEOUT_MS',
    flag: 'shutdown-timeout-ms',
    schema: intFrom(100, 600_000),
    default: 30_000,
    help: 'graceful shutdown budget before exiting non-zero',
  },
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
  maxEventBytes: {
    env: 'MAX_EVENT_BYTES',
    flag: 'max-event-bytes',
    schema: intFrom(1024, 64 * 1024 * 1024),
    // Above the largest message the limits allow (src/contract/busLimits.ts), below an 8 MiB max_payload.
    default: 7 * 1024 * 1024,
    help: "larger events are dead-lettered, larger request bodies refused; the NATS server's max_payload must exceed it (the worker refuses to start otherwise)",
  },
  maxDeliver: {
    env: 'MAX_DELIVER',
    flag: 'max-deliver',
    schema: intFrom(2, 1000),
    default: 10,
    help: 'deliveries before JetStream gives up on an event (then it is dead-lettered)',
  },
  ackWaitMs: {
    env: 'ACK_WAIT_MS',
    flag: 'ack-wait-ms',
    schema: intFrom(1000, 3_600_000),
    default: 30_000,
    help: 'redelivery timeout for an unacknowledged event',
  },
  streamMaxAgeMs: {
    env: 'STREAM_MAX_AGE_MS',
    flag: 'stream-max-age-ms',
    schema: intFrom(60_000, 365 * 86_400_000),
    default: 7 * 86_400_000,
    help: 'how long the event stream keeps events for replay',
  },
  streamReplicas: {
    env: 'STREAM_REPLICAS',
    flag: 'stream-replicas',
    // JetStream's own bound: a stream has at most 5 replicas.
    schema: intFrom(1, 5),
    default: 1,
    help:
      "replicas of every stream and KV bucket the worker creates (1 to 5; at most the JetStream cluster's servers); " +
      'an existing one keeps its count, with a warning saying how to change it',
  },
  reconcilePageSize: {
    env: 'RECONCILE_PAGE_SIZE',
    flag: 'reconcile-page-size',
    schema: intFrom(1, 10_000),
    default: 500,
    help: 'tasks per keyset page in reconcile and verify',
  },
  bootReconcile: {
    env: 'BOOT_RECONCILE',
    flag: 'boot-reconcile',
    schema: z.enum(['true', 'false']).transform((v) => v === 'true'),
    default: 'true',
    help: 'reconcile every task at worker start (true | false)',
  },
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
  queueMaxPerSession: {
    env: 'QUEUE_MAX_PER_SESSION',
    flag: 'queue-max-per-session',
    schema: intFrom(1, 1000),
    default: 10,
    help: "the most waiting queued prompts a session may hold (Kandev's default); queue.enqueue past it replies conflict queue_full; the max of message.queue.status_changed",
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
      "kandev (only this service's own objects beside Kandev's tables; refused where one the service reads is missing)",
  },
  timestampForm: {
    env: 'TIMESTAMP_FORM',
    flag: 'timestamp-form',
    schema: z.enum(TIMESTAMP_FORM_SETTINGS),
    default: 'auto',
    help: "timestamp text written into Kandev's SQLite tables: auto (the form the newest rows use), canonical (2026-08-20T10:00:00.500000000Z) or kandev (2026-08-20 10:00:00.5+00:00); PostgreSQL stores instants either way",
  },
  reservationTtlMs: {
    env: 'RESERVATION_TTL_MS',
    flag: 'reservation-ttl-ms',
    schema: intFrom(100, 3_600_000),
    default: 30_000,
    help: "how long a dispatcher owns a prompt receipt it reserved without renewing it (renewed every third of it); a dead owner's receipt is taken over after it. Every replica must use the same value",
  },
  promptDeadlineMs: {
    env: 'PROMPT_DEADLINE_MS',
    flag: 'prompt-deadline-ms',
    schema: intFrom(100, 600_000),
    default: 10_000,
    help: "how long the one publish of a prompt waits for the prompt stream's acknowledgement; none by then labels the prompt unconfirmed (it is never sent again)",
  },
  dispatchPollMs: {
    env: 'DISPATCH_POLL_MS',
    flag: 'dispatch-poll-ms',
    schema: intFrom(10, 3_600_000),
    default: 1_000,
    help: 'how often the prompt dispatcher looks for due receipts besides the kicks of admission and session events (the safety net)',
  },
  promptDispatchConcurrency: {
    env: 'PROMPT_DISPATCH_CONCURRENCY',
    flag: 'prompt-dispatch-concurrency',
    schema: intFrom(1, 64),
    default: 4,
    help: "sessions whose queue heads one worker process delivers at once (1 to 64); a session's own prompts go one at a time either way",
  },
  respondDeadlineMs: {
    env: 'RESPOND_DEADLINE_MS',
    flag: 'respond-deadline-ms',
    schema: intFrom(100, 600_000),
    default: 30_000,
    help: 'how long clarification.respond waits for the live waiter to confirm, or for the resume stream to acknowledge a detached resume',
  },
} as const;

type Settings = typeof SETTINGS;
export type SettingName = keyof Settings;
export type Config = { [K in SettingName]: z.output<Settings[K]['schema']> };
/** The configuration of a command that reads the settings `names`: exactly those, parsed. */
export type SettingsOf<N extends readonly SettingName[]> = Pick<Config, N[number]>;

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

/** Whether a setting holds a secret: its value is never echoed, its default never shown. */
export function isSecretSetting(name: SettingName): boolean {
  return 'secret' in SETTINGS[name];
}

/** A value as a config error shows it: a secret's never, a URL's without its credentials. */
function shownValue(name: SettingName, raw: string): string {
  return isSecretSetting(name) ? '(a secret value, not shown)' : redactCredentials(JSON.stringify(raw));
}

export class ConfigError extends PendingProjectorError {
  override name = 'ConfigError';
  constructor(readonly problems: string[]) {
    super(ERROR_CODES.CONFIG_INVALID, `invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

type Flags = Record<string, string | boolean | undefined>;

/**
 * Builds the configuration of the settings `only` (every setting when absent) from flags (already
 * parsed, keyed by flag name) and an environment: exactly those settings, no others. Lists every
 * bad setting at once, each with both ways to set it.
 */
export function loadConfig(flags?: Flags, env?: NodeJS.ProcessEnv): Config;
export function loadConfig<const N extends readonly SettingName[]>(flags: Flags, env: NodeJS.ProcessEnv, only: N): SettingsOf<N>;
export function loadConfig(
  flags: Flags = {},
  env: NodeJS.ProcessEnv = process.env,
  only: readonly SettingName[] = Object.keys(SETTINGS) as SettingName[],
): Partial<Config> {
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
      problems.push(
        `${describeNames(name)} = ${shownValue(name, raw)} (from ${source}): ${parsed.error.issues.map((i) => i.message).join('; ')}. Expected ${setting.help}.`,
      );
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  // Each value was parsed by its own setting's schema, so each has its setting's type.
  return config as Partial<Config>;
}

/**
 * `given` with each of `names` it leaves out (or leaves undefined) set to the table's default,
 * parsed as `loadConfig` parses it: how an in-process caller (a test, an embedder) that skips a
 * setting gets the value the CLI would give it, with no copy of the default elsewhere.
 */
export function withDefaults<T extends Partial<Config>, const N extends readonly SettingName[]>(given: T, names: N): T & SettingsOf<N> {
  const missing = names.filter((name) => given[name] === undefined);
  return { ...given, ...loadConfig({}, {}, missing) } as T & SettingsOf<N>;
}
