/**
 * Error classes with stable codes, and the one place unknown throws are normalised and classified.
 * Expected outcomes (a CAS miss, a lost claim) are values, not errors.
 */

/**
 * Every code an error of ours carries, one per class (the class is named beside it). A class
 * elsewhere in `src/` extends PendingProjectorError with its code from here, so a code is unique and
 * a reader finds them all in one place. Reply codes (`bad_request`, ...) are a separate contract:
 * `REPLY_ERROR_CODES` in src/contract/replyErrorCodes.ts.
 */
export const ERROR_CODES = {
  /** ConfigError (src/config.ts): settings that do not validate. */
  CONFIG_INVALID: 'CONFIG_INVALID',
  /** DatabaseUrlError (src/repository/database.ts): a DATABASE_URL no dialect accepts. */
  CONFIG_DATABASE_URL: 'CONFIG_DATABASE_URL',
  /**
   * SqliteWorkerLockedError (src/repository/sqliteWorkerLock.ts): a worker started on a SQLite file
   * that another worker serves (a configuration error: exit 2).
   */
  SQLITE_WORKER_LOCKED: 'SQLITE_WORKER_LOCKED',
  /** PoisonInputError: an input no retry can make succeed. */
  POISON_INPUT: 'POISON_INPUT',
  /** ConflictExhaustedError: the summary compare-and-set kept losing. */
  PROJECTION_CONFLICT_EXHAUSTED: 'PROJECTION_CONFLICT_EXHAUSTED',
  /** DuplicateRevisionsError: the stream holds every revision this projection tried. */
  PROJECTION_DUPLICATE_REVISIONS: 'PROJECTION_DUPLICATE_REVISIONS',
  /** SummaryParseError (src/events/statusSummary.ts): a stored summary that is not a JSON object. */
  SUMMARY_CORRUPT: 'SUMMARY_CORRUPT',
  /** CorruptMetaError (src/repository/projection/meta.ts): a stored epoch that is not a canonical integer. */
  META_CORRUPT: 'META_CORRUPT',
  /** ClaimIntegrityError (src/repository/clarifications/clarificationClaims.ts): a claim's rows do not add up. */
  CLAIM_INTEGRITY: 'CLAIM_INTEGRITY',
  /** InvalidCursorError (src/repository/clarifications/clarifications.ts): a list cursor this service did not issue. */
  INVALID_CURSOR: 'INVALID_CURSOR',
  /** SessionNotFoundError (src/repository/turns/turns.ts): a turn write for a session that does not exist. */
  SESSION_NOT_FOUND: 'SESSION_NOT_FOUND',
  /** TransactionEndedError (src/repository/driver/connectionTransaction.ts): a query after COMMIT/ROLLBACK. */
  TRANSACTION_ENDED: 'TRANSACTION_ENDED',
  /**
   * SchemaRefusedError (src/repository/schema/schemaMode.ts): a database this service will not
   * migrate or run on (some Kandev tables or columns missing, or a forced mode that does not fit).
   */
  SCHEMA_REFUSED: 'SCHEMA_REFUSED',
  /** ReservationEndedError (src/repository/driver/reservedConnection.ts): a query through a reserved connection after it went back. */
  RESERVATION_ENDED: 'RESERVATION_ENDED',
  /**
   * AdmissionPoolTooSmallError (src/repository/admission/taskAdmission.ts): a PostgreSQL pool under two
   * connections, where a lease's lock connection would leave its hooks and transaction none.
   */
  ADMISSION_POOL_TOO_SMALL: 'ADMISSION_POOL_TOO_SMALL',
  /**
   * AdmissionLockOrderError (src/repository/admission/taskAdmission.ts): an admission lock requested
   * where it would not be the outermost lock (inside a transaction, or inside another task's lease).
   */
  ADMISSION_LOCK_ORDER: 'ADMISSION_LOCK_ORDER',
  /**
   * PlanCommentIntegrityError (src/repository/planComments/planCommentOutcomes.ts): a plan-comment write found
   * rows that break an invariant its own locks guarantee (rolled back; nothing written).
   */
  PLAN_COMMENT_INTEGRITY: 'PLAN_COMMENT_INTEGRITY',
  /**
   * NatsPermissionError (src/events/natsPermissions.ts): the NATS user lacks a publish or subscribe
   * permission the worker needs (a configuration error: exit 2).
   */
  NATS_PERMISSION_DENIED: 'NATS_PERMISSION_DENIED',
  /**
   * NatsMaxPayloadError (src/events/natsMaxPayload.ts): the NATS server's max_payload is below the
   * largest message the worker's limits allow (a configuration error: exit 2).
   */
  NATS_MAX_PAYLOAD_TOO_SMALL: 'NATS_MAX_PAYLOAD_TOO_SMALL',
  /**
   * ConnectionFailedError (src/bin/connectionFailure.ts): a command could not connect to NATS or
   * the database: unreachable, TLS refused, credentials refused, or a database that is not there.
   */
  CONNECTION_FAILED: 'CONNECTION_FAILED',
} as const;
export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

export class PendingProjectorError extends Error {
  override name = 'PendingProjectorError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * An input that can never succeed however often it is retried: an event handler rejects with it to
 * have the event dead-lettered on this delivery, with `reason` in the record. Input the envelope
 * schema already refuses never reaches a handler (see parseEvent).
 */
export class PoisonInputError extends PendingProjectorError {
  override name = 'PoisonInputError';
  constructor(
    readonly reason: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(ERROR_CODES.POISON_INPUT, message, options);
  }
}

/** Compare-and-set lost to concurrent writers more times than the retry budget allows. */
export class ConflictExhaustedError extends PendingProjectorError {
  override name = 'ConflictExhaustedError';
  constructor(taskId: string, attempts: number) {
    super(ERROR_CODES.PROJECTION_CONFLICT_EXHAUSTED, `task ${taskId}: summary compare-and-set lost ${attempts} times`);
  }
}

/**
 * The stream already held every revision this projection tried (earlier attempts that published but
 * did not commit). Retried like any bus failure; the duplicate window ends it at the latest.
 */
export class DuplicateRevisionsError extends PendingProjectorError {
  override name = 'DuplicateRevisionsError';
  constructor(taskId: string, first: number, last: number) {
    super(
      ERROR_CODES.PROJECTION_DUPLICATE_REVISIONS,
      `task ${taskId}: the summary stream already holds revisions ${first}-${last} from attempts that did not commit`,
    );
  }
}

export function coerceError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value));
}

/** SQLSTATEs that name the moment, not the statement: the same statement can succeed later. */
const TRANSIENT_PG_CODES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '57P01', // admin_shutdown (the backend was terminated)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, in recovery)
  '53300', // too_many_connections
  '08000', // connection_exception
  '08001', // sqlclient_unable_to_establish_sqlconnection
  '08003', // connection_does_not_exist
  '08004', // sqlserver_rejected_establishment_of_sqlconnection
  '08006', // connection_failure
]);
const TRANSIENT_SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);
/** better-sqlite3 reports extended result codes too (SQLITE_BUSY_SNAPSHOT, SQLITE_LOCKED_SHAREDCACHE). */
const TRANSIENT_SQLITE_CODES = /^SQLITE_(BUSY|LOCKED)(_[A-Z]+)?$/;
/**
 * Matched by name, so this module (which repository/ imports) loads no client library: nats.js 3
 * rejects a request or publish without a reply in time with `TimeoutError` (it has no `code`; the
 * 'TIMEOUT' code was nats.js 2's), and knex rejects a pool wait with `KnexTimeoutError`.
 */
const TRANSIENT_NAMES = new Set(['TimeoutError', 'KnexTimeoutError']);

/**
 * - `poison`: the input itself is bad; retrying cannot help (dead-letter it now).
 * - `transient`: a known blip of the database or the bus; the same input can succeed later.
 * - `unknown`: anything else.
 */
export type FailureClass = 'poison' | 'transient' | 'unknown';

function isTransient(error: Error): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (TRANSIENT_PG_CODES.has(code) || TRANSIENT_SOCKET_CODES.has(code) || TRANSIENT_SQLITE_CODES.test(code))) return true;
  return TRANSIENT_NAMES.has(error.name);
}

/**
 * Classifies a failure by the error and its `cause` chain (nats.js wraps a request's failure in a
 * RequestError with the reason as cause; so may our own errors). The caller retries `transient`
 * and `unknown` with a growing delay and dead-letters `poison` at once. An unknown failure is
 * retried rather than dead-lettered because it is more often the environment than the event (a
 * driver error this list does not name yet), and retrying is bounded: after MAX_DELIVER deliveries
 * the event is dead-lettered anyway, and can be retried from there once the cause is fixed.
 */
export function classifyFailure(value: unknown): FailureClass {
  const chain = causeChain(value);
  if (chain.some((error) => error instanceof PoisonInputError)) return 'poison';
  if (chain.some(isTransient)) return 'transient';
  return 'unknown';
}

/** The PoisonInputError on `value`'s cause chain, if any (its `reason` goes into the dead letter). */
export function poisonCause(value: unknown): PoisonInputError | undefined {
  return causeChain(value).find((error): error is PoisonInputError => error instanceof PoisonInputError);
}

/** `value` and its causes, outermost first; bounded, since nothing stops a cause cycle. */
function causeChain(value: unknown): Error[] {
  const chain: Error[] = [];
  for (let error: unknown = value; error !== undefined && error !== null && chain.length < 8; error = (error as { cause?: unknown }).cause) {
    chain.push(coerceError(error));
  }
  return chain;
}
