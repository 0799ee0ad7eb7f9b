import fs from 'node:fs';
import path from 'node:path';

/**
 * Every entry under `root`, recursively, sorted by path: a directory by its name, a file by its
 * name, size and mtime. Two snapshots are equal exactly when nothing was created, removed, resized
 * or written under `root`. A directory's own mtime is left out: SQLite creates and removes its
 * `-wal`/`-shm` files around a read of a WAL-mode file when no other connection has it open, which
 * touches the directory and nothing in it.
 */
export function fileTree(root: string): string[] {
  if (!fs.existsSync(root)) return [];
  const entries: string[] = [];
  const walk = (dir: string) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const stat = fs.statSync(full);
      const relative = path.relative(root, full);
      if (stat.isDirectory()) {
        entries.push(`${relative}/`);
        walk(full);
      } else entries.push(`${relative} ${stat.size} bytes, mtime ${stat.mtimeMs}`);
    }
  };
  walk(root);
  return entries;
}
