import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Sqlite from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/repository/database.js';
import { cacheStatements } from '../../src/repository/driver/sqliteStatementCache.js';

describe('SQLite statement cache', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function rawDatabase(): Sqlite.Database {
    const db = new Sqlite(':memory:');
    cleanups.push(() => void db.close());
    return db;
  }

  it('reuses the statement compiled for the same SQL and drops the least recently used beyond its limit', () => {
    const db = cacheStatements(rawDatabase(), 2);
    const one = db.prepare('SELECT 1 AS v');
    expect(db.prepare('SELECT 1 AS v')).toBe(one);
    const two = db.prepare('SELECT 2 AS v');
    // Using `one` again makes `two` the least recently used, so the third statement evicts `two`.
    expect(db.prepare('SELECT 1 AS v')).toBe(one);
    db.prepare('SELECT 3 AS v');
    expect(db.prepare('SELECT 1 AS v')).toBe(one);
    const twoAgain = db.prepare('SELECT 2 AS v');
    expect(twoAgain).not.toBe(two);
    expect(twoAgain.get()).toEqual({ v: 2 });
  });

  it("leaves better-sqlite3's own prepares (pragma) alone", () => {
    const db = cacheStatements(rawDatabase(), 2);
    db.pragma('user_version = 7');
    expect(db.pragma('user_version', { simple: true })).toBe(7);
    expect(db.prepare('PRAGMA user_version').get()).toEqual({ user_version: 7 });
  });

  describe('behind knex', () => {
    async function open(): Promise<Database> {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-stmt-'));
      const db = createDatabase(`sqlite:${path.join(dir, 'cache.db')}`, { walCheckpointer: false });
      cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
      cleanups.push(() => db.destroy());
      return db;
    }

    it('is installed on the connection every query runs on', async () => {
      const db = await open();
      const connection = (await db.knex.client.acquireConnection()) as Sqlite.Database;
      try {
        expect(connection.prepare('SELECT 1')).toBe(connection.prepare('SELECT 1'));
      } finally {
        await db.knex.client.releaseConnection(connection);
      }
    });

    it('binds each run afresh and follows schema changes', async () => {
      const db = await open();
      await db.knex.raw('CREATE TABLE t (a INTEGER)');
      await db.knex.raw('INSERT INTO t (a) VALUES (?), (?)', [1, 2]);
      const select = (a: number) => db.knex.raw('SELECT * FROM t WHERE a = ?', [a]);
      expect(await select(1)).toEqual([{ a: 1 }]);
      expect(await select(2)).toEqual([{ a: 2 }]);
      await db.knex.raw("ALTER TABLE t ADD COLUMN b TEXT DEFAULT 'x'");
      expect(await select(2)).toEqual([{ a: 2, b: 'x' }]);
      // Transactions reuse their BEGIN IMMEDIATE and COMMIT statements.
      for (let i = 3; i <= 5; i++) await db.knex.transaction((trx) => trx.raw('INSERT INTO t (a) VALUES (?)', [i]));
      expect(await db.knex.raw('SELECT count(*) AS n FROM t')).toEqual([{ n: 5 }]);
    });
  });
});
