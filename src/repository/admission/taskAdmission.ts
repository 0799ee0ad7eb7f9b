import { AsyncLocalStorage } from 'node:async_hooks';
import { isTransaction, beginOrJoin, type RepositoryContext } from '../context.js';
import type { Database } from '../database.js';
import { withReservedConnection, type ReservedConnection } from '../driver/reservedConnection.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';
import { lockSessionKeys, lockTransactionKey, messageAdmissionKey, taskAdmissionKey, unlockSessionKeys } from './advisoryLocks.js';
import { FifoSemaphore } from './fifoSemaphore.js';
import { KeyedMutex } from './keyedMutex.js';

/**
 * The task admission lease (ADR 0002, "The admission lease", which also says how each dialect
 * holds it).
 *
 * - **Lease** (`withLease`): held by a comment-bearing send from before its preflight until its
 *   accepting transaction finished (COMMIT included), around the turn-start hook, so nothing can
 *   change the comments it validated in between.
 * - **Mutation** (`withMutation`): one transaction of a plan-comment change or `plan.delete`, which
 *   waits while a lease on its task is held (and a lease waits for it).
 * - **Keys**: the task id, and for a lease with a caller id also `'message:' || caller id`, always
 *   task first. The admission lock is always the outermost lock; a call on keys already held joins.
 * - **Timeout**: every wait shares one budget of `lockTimeoutMs`; running out is the value
 *   `{ok: false, reason: 'lock_timeout'}`: nothing ran.
 */

export interface TaskAdmissionOptions {
  /** The budget of every lock wait of one lease or mutation (ADMISSION_LOCK_TIMEOUT_MS). */
  lockTimeoutMs: number;
  /** Told when a lock connection is closed because its unlock failed (the worker logs it). */
  onWarning?: (message: string) => void;
}

interface LeaseOptions {
  /** Also serializes this caller-owned message id, after the task: two requests with one caller id never both run preflight and hooks. */
  callerId?: string;
}

export type AdmissionOutcome<T> =
  | { ok: true; value: T }
  /** The lock stayed held by someone else for the whole budget; `fn` did not run. */
  | { ok: false; reason: 'lock_timeout'; lockTimeoutMs: number };

export interface TaskAdmission {
  readonly lockTimeoutMs: number;
  /**
   * Runs `fn` holding the task's admission lease (and the caller id's, if given); releases it once
   * `fn`'s promise settled, whatever the outcome. `fn`'s rejection is passed on.
   */
  withLease<T>(taskId: string, fn: () => Promise<T>, options?: LeaseOptions): Promise<AdmissionOutcome<T>>;
  /**
   * Runs `fn` in a new transaction that holds the task's admission lock, so it serializes with
   * leases and other mutations of the task. `ctx` must not be a transaction, unless this is called
   * inside a lease or mutation holding the task, where it joins (`beginOrJoin(ctx, fn)`).
   */
  withMutation<T>(ctx: RepositoryContext, taskId: string, fn: (tx: RepositoryContext) => Promise<T>): Promise<AdmissionOutcome<T>>;
  /**
   * Callers of this process waiting right now for the locks a lease with these arguments takes:
   * the task's, plus the caller id's when given.
   */
  waiting(taskId: string, options?: LeaseOptions): number;
}

export class AdmissionPoolTooSmallError extends PendingProjectorError {
  override name = 'AdmissionPoolTooSmallError';
  constructor(maxConnections: number) {
    super(
      ERROR_CODES.ADMISSION_POOL_TOO_SMALL,
      `the PostgreSQL pool has ${maxConnections} connection(s); admission needs at least 2 (DB_MAX_CONNECTIONS): a lease holds one for its advisory lock while its hooks and accepting transaction use another`,
    );
  }
}

export class AdmissionLockOrderError extends PendingProjectorError {
  override name = 'AdmissionLockOrderError';
  constructor(message: string) {
    super(ERROR_CODES.ADMISSION_LOCK_ORDER, message);
  }
}

/** The admission keys held by the current async context; `active` goes false once the holder settled. */
interface HeldScope {
  readonly keys: ReadonlySet<string>;
  active: boolean;
}

/** The in-process state shared by every TaskAdmission on one pool. */
interface Registry {
  readonly mutex: KeyedMutex;
  /** PostgreSQL: permits for lock connections, `maxConnections − 1`. */
  readonly lockConnections?: FifoSemaphore;
  readonly held: AsyncLocalStorage<HeldScope>;
}

// Per pool, not per URL: the semaphore is a share of one pool, and two pools on one PostgreSQL
// database meet on the server. A second pool on one SQLite file is as a second process there.
const registries = new WeakMap<Database, Registry>();

function registryOf(db: Database): Registry {
  let registry = registries.get(db);
  if (!registry) {
    registry = {
      mutex: new KeyedMutex(),
      lockConnections: db.dialect.advisoryLocks ? new FifoSemaphore(db.maxConnections - 1) : undefined,
      held: new AsyncLocalStorage<HeldScope>(),
    };
    registries.set(db, registry);
  }
  return registry;
}

/**
 * The keys of a lease, in the order they are taken: the task, then the caller id. Once each: a task
 * id `message:x` and a caller id `x` share a key (as in Kandev), and a mutex is not re-entrant.
 */
function admissionKeys(taskId: string, options: LeaseOptions): string[] {
  const task = taskAdmissionKey(taskId);
  if (options.callerId === undefined) return [task];
  const message = messageAdmissionKey(options.callerId);
  return message === task ? [task] : [task, message];
}

/** Thrown inside a mutation's transaction to roll it back when its lock wait ran out. */
class LockWaitEnded extends Error {}

/**
 * The admission lease and mutation lock of `db`'s tasks. Refuses a PostgreSQL pool under two
 * connections (AdmissionPoolTooSmallError).
 */
export function createTaskAdmission(db: Database, options: TaskAdmissionOptions): TaskAdmission {
  const serverLocks = db.dialect.advisoryLocks;
  if (serverLocks && db.maxConnections < 2) throw new AdmissionPoolTooSmallError(db.maxConnections);
  const { mutex, lockConnections, held } = registryOf(db);
  const { lockTimeoutMs } = options;
  const timedOut = () => ({ ok: false, reason: 'lock_timeout', lockTimeoutMs }) as const;

  /** Whether the current context already holds every key; refuses a request for others inside it. */
  function joinsHeld(keys: readonly string[], what: string): boolean {
    const scope = held.getStore();
    if (!scope?.active) return false;
    if (keys.every((key) => scope.keys.has(key))) return true;
    throw new AdmissionLockOrderError(`${what} inside an admission lease on other keys: admission locks do not nest across tasks or caller ids`);
  }

  async function runHolding<T>(keys: readonly string[], fn: () => Promise<T>): Promise<T> {
    const scope: HeldScope = { keys: new Set(keys), active: true };
    try {
      return await held.run(scope, fn);
    } finally {
      scope.active = false;
    }
  }

  /** Takes the in-process locks of `keys` in order; false (holding none) when the budget ran out. */
  async function lockInProcess(keys: readonly string[], deadline: number): Promise<boolean> {
    for (const [i, key] of keys.entries()) {
      if (await mutex.acquire(key, deadline)) continue;
      unlockInProcess(keys.slice(0, i));
      return false;
    }
    return true;
  }

  function unlockInProcess(keys: readonly string[]): void {
    for (const key of [...keys].reverse()) mutex.release(key);
  }

  async function unlock(connection: ReservedConnection, keys: readonly string[], taskId: string): Promise<void> {
    let problem: string | undefined;
    try {
      if (!(await unlockSessionKeys(connection, keys))) problem = 'returned false';
    } catch (err) {
      problem = `failed (${(err as Error).message})`;
    }
    if (problem === undefined) return;
    // It may still hold the lock: closed, so the server drops it, and never lent out again.
    await connection.dispose(new Error(`admission unlock ${problem}`));
    options.onWarning?.(
      `admission lease of task ${JSON.stringify(taskId)}: advisory unlock ${problem}; its lock connection was closed and will not be lent out again`,
    );
  }

  /** PostgreSQL: the server-side part of a lease, on a reserved connection. */
  async function leaseOnServer<T>(taskId: string, keys: readonly string[], deadline: number, fn: () => Promise<T>): Promise<AdmissionOutcome<T>> {
    if (!(await lockConnections!.acquire(deadline))) return timedOut();
    try {
      return await withReservedConnection(db.knex, db.dialect, async (connection) => {
        let locked;
        try {
          locked = await lockSessionKeys(connection, keys, deadline);
        } catch (err) {
          // Which of the keys it holds now is unknown.
          await connection.dispose(err);
          throw err;
        }
        if (locked === 'timeout') return timedOut();
        try {
          return { ok: true as const, value: await runHolding(keys, fn) };
        } finally {
          await unlock(connection, keys, taskId);
        }
      });
    } finally {
      lockConnections!.release();
    }
  }

  /** PostgreSQL: a mutation's transaction, its first statement the task's transaction-level lock. */
  async function mutationOnServer<T>(
    ctx: RepositoryContext,
    key: string,
    deadline: number,
    fn: (tx: RepositoryContext) => Promise<T>,
  ): Promise<AdmissionOutcome<T>> {
    let lockWaitEnded = false;
    try {
      const value = await beginOrJoin(ctx, async (tx) => {
        if ((await lockTransactionKey(tx, key, deadline)) === 'timeout') {
          lockWaitEnded = true;
          throw new LockWaitEnded();
        }
        return fn(tx);
      });
      return { ok: true, value };
    } catch (err) {
      if (lockWaitEnded) return timedOut();
      throw err;
    }
  }

  return {
    lockTimeoutMs,

    async withLease(taskId, fn, leaseOptions = {}) {
      const keys = admissionKeys(taskId, leaseOptions);
      if (joinsHeld(keys, 'a lease')) return { ok: true, value: await fn() };
      const deadline = performance.now() + lockTimeoutMs;
      if (!(await lockInProcess(keys, deadline))) return timedOut();
      try {
        if (!serverLocks) return { ok: true, value: await runHolding(keys, fn) };
        return await leaseOnServer(taskId, keys, deadline, fn);
      } finally {
        unlockInProcess(keys);
      }
    },

    async withMutation(ctx, taskId, fn) {
      const key = taskAdmissionKey(taskId);
      if (joinsHeld([key], 'a mutation')) return { ok: true, value: await beginOrJoin(ctx, fn) };
      if (isTransaction(ctx.knex)) {
        // Waiting for the lease while holding a connection (SQLite: the only writer) and whatever
        // the transaction locked already would break the lock order, and can deadlock.
        throw new AdmissionLockOrderError('withMutation was given an open transaction: it opens its own, so that the admission lock is its first lock');
      }
      const deadline = performance.now() + lockTimeoutMs;
      if (!(await mutex.acquire(key, deadline))) return timedOut();
      try {
        return await runHolding([key], () =>
          serverLocks ? mutationOnServer(ctx, key, deadline, fn) : beginOrJoin(ctx, fn).then((value) => ({ ok: true as const, value })),
        );
      } finally {
        mutex.release(key);
      }
    },

    waiting(taskId, leaseOptions = {}) {
      return admissionKeys(taskId, leaseOptions).reduce((sum, key) => sum + mutex.waiting(key), 0);
    },
  };
}
