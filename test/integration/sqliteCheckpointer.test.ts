import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/repository/database.js';
import { startSqliteCheckpointer } from '../../src/repository/driver/sqliteCheckpointer.js';

const ROW = 'x'.repeat(2000);

describe('the SQLite WAL checkpointer thread', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function fileDatabase(options: Parameters<typeof createDatabase>[1] = {}): { db: Database; file: string } {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-ckpt-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'test.db');
    const db = createDatabase(`sqlite:${file}`, options);
    cleanups.push(() => db.destroy());
    return { db, file };
  }

  /** ~2 MB per call, in transactions of 100 rows, as the worker writes. */
  async function write(db: Database, rounds = 10) {
    for (let i = 0; i < rounds; i++) {
      await db.knex.transaction(async (trx) => {
        for (let j = 0; j < 100; j++) await trx.raw('INSERT INTO filler (payload) VALUES (?)', [ROW]);
      });
    }
  }

  async function until(condition: () => boolean, what: string) {
    for (let waited = 0; !condition(); waited += 20) {
      if (waited > 5000) throw new Error(`timed out waiting until ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  const autocheckpoint = async (db: Database) =>
    ((await db.knex.raw('PRAGMA wal_autocheckpoint')) as Array<{ wal_autocheckpoint: number }>)[0]!.wal_autocheckpoint;
  const size = (file: string) => (fs.existsSync(file) ? fs.statSync(file).size : 0);

  it('copies the WAL into the database from its own thread while the connection never checkpoints', async () => {
    const { db, file } = fileDatabase();
    await db.knex.raw('CREATE TABLE filler (payload TEXT)');
    expect(db.walCheckpointer?.running).toBe(true);
    expect(await autocheckpoint(db)).toBe(0);
    const before = size(file);
    await write(db);
    // ~2 MB went to the WAL; only a checkpoint puts it in the database file.
    await until(() => size(file) - before > 1_500_000, 'the database file holds the rows');
  });

  it('keeps the WAL bounded: the writer restarts it once a checkpoint has copied all of it', async () => {
    const { db, file } = fileDatabase();
    await db.knex.raw('CREATE TABLE filler (payload TEXT)');
    for (let i = 0; i < 8; i++) {
      await write(db, 5);
      // Let a checkpoint run between bursts, as the 200 ms ticks do between a worker's commits.
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    // 8 MB written in all; without checkpoints the WAL would hold all of it.
    expect(size(`${file}-wal`)).toBeLessThan(4_000_000);
  });

  it('stops with the database, and SQLite removes the WAL when its last connection closes', async () => {
    const { db, file } = fileDatabase();
    await db.knex.raw('CREATE TABLE filler (payload TEXT)');
    await write(db, 2);
    const checkpointer = db.walCheckpointer!;
    await db.destroy();
    expect(checkpointer.running).toBe(false);
    expect(fs.existsSync(`${file}-wal`)).toBe(false);
  });

  it('hands checkpoints back to the connection when the thread fails, with a warning', async () => {
    const warnings: string[] = [];
    const { db } = fileDatabase({
      onWarning: (message) => warnings.push(message),
      // The real thread, on a file that does not exist: it fails at once.
      walCheckpointer: (options) => startSqliteCheckpointer({ ...options, filename: `${options.filename}.missing` }),
    });
    await db.knex.raw('CREATE TABLE filler (payload TEXT)');
    await until(() => db.walCheckpointer?.running === false, 'the thread exited');
    await until(() => warnings.length > 0, 'a warning');
    expect(warnings[0]).toMatch(/WAL checkpointer stopped .*checkpoints by itself again/);
    expect(await autocheckpoint(db)).toBe(1000);
  });

  it('is not started for an in-memory database or when turned off', async () => {
    const memory = createDatabase('sqlite::memory:');
    cleanups.push(() => memory.destroy());
    await memory.knex.raw('SELECT 1');
    expect(memory.walCheckpointer).toBeUndefined();
    const { db } = fileDatabase({ walCheckpointer: false });
    await db.knex.raw('SELECT 1');
    expect(db.walCheckpointer).toBeUndefined();
    expect(await autocheckpoint(db)).toBe(1000);
  });
});
