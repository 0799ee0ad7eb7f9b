import type { RepositoryContext } from '../context.js';
import type { ReservedConnection } from '../driver/reservedConnection.js';

/**
 * PostgreSQL advisory locks of the admission lease, on Kandev's keys: `hashtextextended(<key>, 0)`
 * of the task id itself for the task, and of `'message:' || <caller id>` for a caller-owned message
 * id (Kandev's plan-comment admission uses exactly these, so a Kandev backend on the same database
 * serializes with this service). A session-level lock (the lease, on its reserved connection) and a
 * transaction-level lock (a mutation) on one key conflict across backends, so both sides meet on
 * the one key.
 *
 * Each wait first tries the lock (one round trip when nobody holds it) and only then waits, under
 * `lock_timeout` set to what is left of the caller's budget: a wait past it fails with SQLSTATE
 * 55P03, which these functions turn into the value `'timeout'`.
 */

/** The advisory key text of a task's admission lock. */
export function taskAdmissionKey(taskId: string): string {
  return taskId;
}

/** The advisory key text of a caller-owned message id, taken after the task's (one caller id, one preflight at a time). */
export function messageAdmissionKey(callerId: string): string {
  return `message:${callerId}`;
}

/** SQLSTATE lock_not_available: `lock_timeout` ran out. */
const LOCK_NOT_AVAILABLE = '55P03';

function isLockTimeout(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === LOCK_NOT_AVAILABLE;
}

/** What is left of the budget, as a `lock_timeout` value; undefined when nothing is. */
function remainingTimeout(deadline: number): string | undefined {
  const remaining = Math.ceil(deadline - performance.now());
  return remaining > 0 ? `${remaining}ms` : undefined;
}

/**
 * Takes the session-level locks of `keys`, in order, on `connection`. On `'timeout'` every key
 * this call took is released again. Throws on anything else (the caller then disposes the
 * connection: which locks it still holds is unknown).
 */
export async function lockSessionKeys(connection: ReservedConnection, keys: readonly string[], deadline: number): Promise<'locked' | 'timeout'> {
  const locked: string[] = [];
  for (const key of keys) {
    const [tried] = await connection.raw<{ locked: boolean }>('SELECT pg_try_advisory_lock(hashtextextended(?, 0)) AS locked', [key]);
    if (tried?.locked) {
      locked.push(key);
      continue;
    }
    const timeout = remainingTimeout(deadline);
    let timedOut = timeout === undefined;
    if (timeout !== undefined) {
      await connection.raw(`SELECT set_config('lock_timeout', ?, false)`, [timeout]);
      let failure: unknown;
      try {
        await connection.raw('SELECT pg_advisory_lock(hashtextextended(?, 0))', [key]);
      } catch (err) {
        if (isLockTimeout(err)) timedOut = true;
        else failure = err;
      }
      // Back to the connection's default before it serves anyone else; a lock failure is the
      // error worth reporting if both fail.
      await connection.raw('RESET lock_timeout').catch((resetError: unknown) => {
        throw failure ?? resetError;
      });
      if (failure !== undefined) throw failure;
    }
    if (timedOut) {
      if (!(await unlockSessionKeys(connection, locked))) throw new Error(`advisory unlock of ${locked.length} key(s) returned false`);
      return 'timeout';
    }
    locked.push(key);
  }
  return 'locked';
}

/**
 * Releases the session-level locks of `keys` on `connection` in one statement. Resolves false when
 * any unlock returned false (this session did not hold it); rejects when the statement failed.
 */
export async function unlockSessionKeys(connection: ReservedConnection, keys: readonly string[]): Promise<boolean> {
  if (keys.length === 0) return true;
  const columns = keys.map((_, i) => `pg_advisory_unlock(hashtextextended(?, 0)) AS k${i}`).join(', ');
  const [row] = await connection.raw<Record<string, boolean>>(`SELECT ${columns}`, keys);
  return keys.every((_, i) => row?.[`k${i}`] === true);
}

/**
 * Takes the transaction-level lock of `key` in `tx` (which must have taken no other lock yet:
 * the admission lock is the outermost). `lock_timeout` is set for this wait only (`SET LOCAL`,
 * then back to the connection's default for the rest of the transaction). On `'timeout'` the
 * transaction is aborted and must roll back.
 */
export async function lockTransactionKey(tx: RepositoryContext, key: string, deadline: number): Promise<'locked' | 'timeout'> {
  const tried = (
    await tx.dialect.rawResultRows<{ locked: boolean }>(await tx.knex.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS locked', [key]))
  )[0];
  if (tried?.locked) return 'locked';
  const timeout = remainingTimeout(deadline);
  if (timeout === undefined) return 'timeout';
  await tx.knex.raw(`SELECT set_config('lock_timeout', ?, true)`, [timeout]);
  try {
    await tx.knex.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [key]);
  } catch (err) {
    if (isLockTimeout(err)) return 'timeout';
    throw err;
  }
  // The transaction's own statements wait as they would without the lease.
  await tx.knex.raw('SET LOCAL lock_timeout TO DEFAULT');
  return 'locked';
}
