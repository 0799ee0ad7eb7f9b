import type { Database } from '../../src/repository/database.js';

interface AdvisoryLockEntry {
  pid: number;
  granted: boolean;
}

/**
 * Who holds and who waits for the advisory lock `hashtextextended(key, 0)` in this database, as the
 * server reports it (a bigint key is split into classid, the high half, and objid, the low half).
 */
async function advisoryLockEntries(db: Database, key: string): Promise<AdvisoryLockEntry[]> {
  const result = (await db.knex.raw(
    `SELECT pid, granted FROM pg_locks
      WHERE locktype = 'advisory' AND objsubid = 1
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(?, 0)
      ORDER BY granted DESC, pid`,
    [key],
  )) as { rows: AdvisoryLockEntry[] };
  return result.rows;
}

/** The backend holding `key`'s advisory lock, if any. */
export async function advisoryLockHolder(db: Database, key: string): Promise<number | undefined> {
  return (await advisoryLockEntries(db, key)).find((entry) => entry.granted)?.pid;
}

/** How many backends wait for `key`'s advisory lock. */
export async function advisoryLockWaiters(db: Database, key: string): Promise<number> {
  return (await advisoryLockEntries(db, key)).filter((entry) => !entry.granted).length;
}
