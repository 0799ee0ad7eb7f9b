import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import BetterSqlite3 from 'better-sqlite3';
import { ERROR_CODES, PendingProjectorError } from '../errors.js';

/** Who holds a SQLite file's worker lock, as its holder wrote it. */
export interface SqliteWorkerLockHolder {
  readonly pid: number;
  readonly host: string;
  /** ISO time the holder took the lock. */
  readonly since: string;
}

/** A second worker on a SQLite file that a running worker already serves. */
export class SqliteWorkerLockedError extends PendingProjectorError {
  override name = 'SqliteWorkerLockedError';
  constructor(
    readonly databaseFile: string,
    readonly lockFile: string,
    readonly holder: SqliteWorkerLockHolder | undefined,
  ) {
    const who = holder ? `worker pid ${holder.pid} on ${holder.host}, since ${holder.since}` : 'another worker';
    super(
      ERROR_CODES.SQLITE_WORKER_LOCKED,
      `${databaseFile} is served by ${who}: one worker process per SQLite file (stop that one first, or use PostgreSQL for several replicas; lock ${lockFile})`,
    );
  }
}

/** A held worker lock; release() is idempotent. */
export interface SqliteWorkerLock {
  readonly lockFile: string;
  release(): void;
}

// A few rounds of the two-step take (see below) when another process is between its steps.
const TAKE_ATTEMPTS = 20;
const TAKE_RETRY_MS = 25;

const CREATE_HOLDER =
  'CREATE TABLE IF NOT EXISTS holder (id INTEGER PRIMARY KEY CHECK (id = 1), token TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, since TEXT NOT NULL)';

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

/** BEGIN IMMEDIATE without waiting: true when this connection now holds the file's write lock. */
function tryBegin(conn: BetterSqlite3.Database): boolean {
  try {
    conn.exec('BEGIN IMMEDIATE');
    return true;
  } catch (err) {
    if (isBusy(err)) return false;
    throw err;
  }
}

function readHolder(conn: BetterSqlite3.Database): (SqliteWorkerLockHolder & { token: string }) | undefined {
  try {
    return conn.prepare('SELECT token, pid, host, since FROM holder WHERE id = 1').get() as (SqliteWorkerLockHolder & { token: string }) | undefined;
  } catch (err) {
    // No table yet (its creator has not committed), or the file is between writers: unknown holder.
    if (isBusy(err) || /no such table/.test((err as Error).message)) return undefined;
    throw err;
  }
}

/**
 * Takes the worker lock of a SQLite database file, or throws SqliteWorkerLockedError naming the
 * worker that holds it. The task admission lease serialises a prompt's turn-start hook inside one
 * process only, so a second worker on the same file must not start.
 *
 * The lock is a write transaction (`BEGIN IMMEDIATE`, never committed) held open on a sibling file,
 * `<database>.worker-lock`: the operating system drops it with its process, so a worker killed with
 * SIGKILL leaves nothing to clean up, and no expiry is needed. Its holder is written and committed
 * first, then the transaction is taken again and held, so a refused worker can read who holds it. A
 * racer that slipped in between the two steps is seen by its token, and the take starts over. The
 * file stays after release: removing it could let two processes lock two different files.
 */
export async function acquireSqliteWorkerLock(databaseFile: string): Promise<SqliteWorkerLock> {
  const lockFile = `${databaseFile}.worker-lock`;
  // timeout 0: a busy lock is an answer, not something to wait for.
  const conn = new BetterSqlite3(lockFile, { timeout: 0 });
  const token = randomUUID();
  try {
    for (let attempt = 1; ; attempt++) {
      if (tryBegin(conn)) {
        conn.exec(CREATE_HOLDER);
        conn
          .prepare('INSERT OR REPLACE INTO holder (id, token, pid, host, since) VALUES (1, ?, ?, ?, ?)')
          .run(token, process.pid, os.hostname(), new Date().toISOString());
        conn.exec('COMMIT');
        if (tryBegin(conn)) {
          if (readHolder(conn)?.token === token) return held(conn, lockFile);
          conn.exec('ROLLBACK');
        }
      } else {
        const holder = readHolder(conn);
        // Another process's committed holder while the lock is taken: it is that process.
        if (holder && holder.token !== token)
          throw new SqliteWorkerLockedError(databaseFile, lockFile, { pid: holder.pid, host: holder.host, since: holder.since });
      }
      if (attempt >= TAKE_ATTEMPTS) throw new SqliteWorkerLockedError(databaseFile, lockFile, undefined);
      await sleep(TAKE_RETRY_MS * (0.5 + Math.random()));
    }
  } catch (err) {
    conn.close();
    throw err;
  }
}

function held(conn: BetterSqlite3.Database, lockFile: string): SqliteWorkerLock {
  let released = false;
  return {
    lockFile,
    release() {
      if (released) return;
      released = true;
      conn.exec('ROLLBACK');
      conn.close();
    },
  };
}
