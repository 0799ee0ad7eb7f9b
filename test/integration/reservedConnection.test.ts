import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDatabase, type Database } from '../../src/repository/database.js';
import { ReservationEndedError, withReservedConnection, type ReservedConnection } from '../../src/repository/driver/reservedConnection.js';
import { beginOrJoin } from '../../src/repository/context.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { advisoryLockHolder } from '../support/advisoryLocks.js';
import { eventually } from '../support/nats.js';

describeEachDialect('a reserved connection on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
  });
  afterAll(async () => {
    await t.close();
  });

  /** Something that tells one connection from another on each dialect. */
  const identity = async (connection: ReservedConnection): Promise<string> =>
    dialect === 'postgres'
      ? String((await connection.raw<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]!.pid)
      : String((await connection.raw<{ file: string }>('SELECT file FROM pragma_database_list WHERE name = ?', ['temp']))[0]?.file ?? '');

  it('keeps session state from one statement to the next, outside any transaction', async () => {
    const table = `reserved_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
    const rows = await withReservedConnection(t.db.knex, t.db.dialect, async (connection) => {
      // A temporary table lives in its connection's session only.
      await connection.raw(`CREATE TEMPORARY TABLE ${table} (v INTEGER)`);
      await connection.raw(`INSERT INTO ${table} (v) VALUES (?)`, [7]);
      const read = await connection.raw<{ v: number }>(`SELECT v FROM ${table}`);
      await connection.raw(`DROP TABLE ${table}`);
      return read;
    });
    expect(rows).toEqual([{ v: 7 }]);
  });

  it('holds its connection out of the pool until it ends, and then gives it back', async () => {
    const stored = randomUUID();
    await withReservedConnection(t.db.knex, t.db.dialect, async (connection) => {
      await connection.raw('SELECT 1');
      if (dialect === 'postgres') {
        // The others still serve transactions meanwhile.
        await beginOrJoin(t.ctx, (tx) => tx.knex('kandev_meta').insert({ key: stored, value: 'v' }));
      }
    });
    // SQLite has one connection: a transaction after the reservation proves it came back.
    await beginOrJoin(t.ctx, (tx) => tx.knex('kandev_meta').insert({ key: `${stored}-after`, value: 'v' }));
    expect(
      await t.ctx
        .knex('kandev_meta')
        .whereIn('key', [stored, `${stored}-after`])
        .count({ n: '*' }),
    ).toEqual([{ n: dialect === 'postgres' ? 2 : 1 }]);
  });

  it('refuses a statement through it once it went back to the pool', async () => {
    let kept: ReservedConnection | undefined;
    await withReservedConnection(t.db.knex, t.db.dialect, async (connection) => {
      kept = connection;
    });
    await expect(kept!.raw('SELECT 1')).rejects.toBeInstanceOf(ReservationEndedError);
  });

  it('never lends a disposed connection out again', async () => {
    // A pool of its own, so every connection it lends can be looked at.
    const pool: Database = createDatabase(t.url, { searchPath: t.searchPath, maxConnections: 2, walCheckpointer: false });
    try {
      const disposed = await withReservedConnection(pool.knex, pool.dialect, async (connection) => {
        const id = await identity(connection);
        await connection.dispose(new Error('disposed by the test'));
        expect(connection.disposed).toBe(true);
        return id;
      });
      const seen = await Promise.all(
        Array.from({ length: pool.maxConnections }, () =>
          withReservedConnection(pool.knex, pool.dialect, async (connection) => ({
            id: await identity(connection),
            one: await connection.raw('SELECT 1 AS one'),
          })),
        ),
      );
      for (const { id, one } of seen) {
        expect(one).toEqual([{ one: 1 }]);
        if (dialect === 'postgres') expect(id).not.toBe(disposed);
      }
    } finally {
      await pool.destroy();
    }
  });

  if (dialect === 'postgres') {
    it('closes a disposed connection at once, so the server drops the session lock it held', async () => {
      const key = `reserved-${randomUUID()}`;
      await withReservedConnection(t.db.knex, t.db.dialect, async (connection) => {
        await connection.raw('SELECT pg_advisory_lock(hashtextextended(?, 0))', [key]);
        expect(await advisoryLockHolder(t.db, key)).toBeDefined();
        await connection.dispose(new Error('its unlock failed'));
        // Still reserved, yet the lock is gone: the backend ended with its connection.
        await eventually(async () => ((await advisoryLockHolder(t.db, key)) === undefined ? true : undefined), 10_000, 'the server to drop the lock');
      });
    });
  }
});
