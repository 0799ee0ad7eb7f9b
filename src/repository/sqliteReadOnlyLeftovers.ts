import fs from 'node:fs';
import Database from 'better-sqlite3';

/**
 * Undoes what a read-only connection leaves beside a WAL-mode SQLite file. Such a connection creates
 * the `-wal` and `-shm` files when no other connection has them open, and, being read-only, cannot
 * delete them when it closes. `tidy()` (after the read-only pool closed) opens one plain connection
 * that reads a page and closes: SQLite deletes both files on the close of the last connection, under
 * its own exclusive lock, and leaves them when another process (a worker that started meanwhile)
 * still uses them. It writes no page: the WAL it checkpoints is empty, unless that other process
 * wrote, and then the pages are that process's. Nothing happens when either file was there before.
 */
export function readOnlyLeftovers(filename: string): { tidy(): void } {
  const sidecars = [`${filename}-wal`, `${filename}-shm`];
  const before = sidecars.some((file) => fs.existsSync(file));
  return {
    tidy() {
      if (before || !sidecars.some((file) => fs.existsSync(file)) || !fs.existsSync(filename)) return;
      const db = new Database(filename, { fileMustExist: true, timeout: 1000 });
      try {
        db.prepare('SELECT 1 FROM sqlite_master LIMIT 1').get();
      } finally {
        db.close();
      }
    },
  };
}
