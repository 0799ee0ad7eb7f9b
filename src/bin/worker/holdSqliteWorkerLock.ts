import type { Database } from '../../repository/database.js';
import { acquireSqliteWorkerLock, type SqliteWorkerLock } from '../../repository/sqliteWorkerLock.js';

interface Shared {
  readonly lock: Promise<SqliteWorkerLock>;
  holders: number;
}

// Per pool: workers started in one process on one Database share its admission lease, so they share
// the lock too; a second pool on the same file is refused like a second process.
const shared = new WeakMap<Database, Shared>();

/**
 * Holds the worker lock of `db`'s SQLite file while a worker runs on it (nothing for PostgreSQL or
 * an in-memory database). Resolves to its release, which the last worker of the pool to stop
 * releases; throws SqliteWorkerLockedError when another worker serves the file.
 */
export async function holdSqliteWorkerLock(db: Database): Promise<() => void> {
  const file = db.sqliteFile;
  if (!file) return () => undefined;
  let entry = shared.get(db);
  if (!entry) {
    entry = { lock: acquireSqliteWorkerLock(file), holders: 0 };
    shared.set(db, entry);
  }
  const current = entry;
  current.holders++;
  try {
    await current.lock;
  } catch (err) {
    if (--current.holders === 0 && shared.get(db) === current) shared.delete(db);
    throw err;
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--current.holders > 0) return;
    if (shared.get(db) === current) shared.delete(db);
    void current.lock.then((lock) => lock.release());
  };
}
