/**
 * Error classes with stable codes, and the one place unknown throws are normalised and classified.
 * Expected outcomes (a CAS miss, a lost claim) are values, not errors.
 */

export const ERROR_CODES = {
  CONFIG_INVALID: 'CONFIG_INVALID',
  EVENT_MALFORMED: 'EVENT_MALFORMED',
  EVENT_TOO_LARGE: 'EVENT_TOO_LARGE',
  PROJECTION_CONFLICT_EXHAUSTED: 'PROJECTION_CONFLICT_EXHAUSTED',
  PROJECTION_DUPLICATE_REVISIONS: 'PROJECTION_DUPLICATE_REVISIONS',
  SUMMARY_CORRUPT: 'SUMMARY_CORRUPT',
  INTERNAL: 'INTERNAL',
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

/** An input that can never succeed however often it is retried: dead-letter it. */
export class PoisonInputError extends PendingProjectorError {
  override name = 'PoisonInputError';
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
    super(ERROR_CODES.PROJECTION_DUPLICATE_REVISIONS, `task ${taskId}: the summary stream already holds revisions ${first}-${last} from attempts that did not commit`);
  }
}

export function coerceError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value));
}

const TRANSIENT_PG_CODES = new Set(['40001', '40P01', '57P01', '57P02', '57P03', '53300', '08000', '08003', '08006', '08001', '08004']);
const TRANSIENT_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'SQLITE_BUSY', 'SQLITE_LOCKED']);

/**
 * `retry`: worth trying again later (database or bus blips, lost CAS races).
 * `poison`: the input itself is bad; retrying cannot help.
 */
export function classifyFailure(value: unknown): 'retry' | 'poison' {
  const error = coerceError(value);
  if (error instanceof PoisonInputError) return 'poison';
  const code = String((error as { code?: unknown }).code ?? '');
  if (TRANSIENT_PG_CODES.has(code) || TRANSIENT_NODE_CODES.has(code)) return 'retry';
  // Everything else is retried too (with growing delay, bounded by max_deliver): an unknown
  // failure is more often the environment than the event, and the dead-letter path still catches
  // an event that fails every delivery.
  return 'retry';
}
