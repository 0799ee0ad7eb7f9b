import { randomUUID } from 'node:crypto';
import Sqlite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransactionEndedError } from '../../src/repository/driver/connectionTransaction.js';
import { createRepositoryContext, beginOrJoin } from '../../src/repository/context.js';
import { createDatabase } from '../../src/repository/database.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';

describeEachDialect('transactions on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
  });
  afterAll(async () => {
    await t.close();
  });

  const insertMeta = (knex: TestDatabase['ctx']['knex'], key: string) => knex('kandev_meta').insert({ key, value: 'v' });
  const hasMeta = async (key: string) => (await t.ctx.knex('kandev_meta').where({ key }).first()) !== undefined;

  it('commits what the function wrote and returns its result', async () => {
    const key = randomUUID();
    const result = await beginOrJoin(t.ctx, async (tx) => {
      await insertMeta(tx.knex, key);
      return 42;
    });
    expect(result).toBe(42);
    expect(await hasMeta(key)).toBe(true);
  });

  it('rolls back everything, nested transactions included, and rethrows the original error', async () => {
    const outer = randomUUID();
    const inner = randomUUID();
    const boom = new Error('boom');
    await expect(
      beginOrJoin(t.ctx, async (tx) => {
        await insertMeta(tx.knex, outer);
        await beginOrJoin(tx, (nested) => insertMeta(nested.knex, inner));
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await hasMeta(outer)).toBe(false);
    expect(await hasMeta(inner)).toBe(false);
  });

  it('refuses a query through the handle once its transaction ended, instead of running it outside', async () => {
    let handle: TestDatabase['ctx']['knex'] | undefined;
    await beginOrJoin(t.ctx, async (tx) => {
      handle = tx.knex;
    });
    const key = randomUUID();
    await expect(insertMeta(handle!, key)).rejects.toBeInstanceOf(TransactionEndedError);
    expect(await hasMeta(key)).toBe(false);
  });

  it('gives every connection back to the pool, after a commit and after a rollback', async () => {
    const runs = t.db.maxConnections * 3;
    await Promise.all(
      Array.from({ length: runs }, async (_, i) => {
        await beginOrJoin(t.ctx, async (tx) => {
          await tx.knex.raw('SELECT 1');
          if (i % 2) throw new Error('rolled back');
        }).catch((err: Error) => expect(err.message).toBe('rolled back'));
      }),
    );
    // Every connection came back: as many concurrent transactions as the pool holds still open.
    const key = randomUUID();
    await Promise.all(Array.from({ length: t.db.maxConnections }, (_, i) => beginOrJoin(t.ctx, (tx) => insertMeta(tx.knex, `${key}-${i}`))));
    expect(await t.ctx.knex('kandev_meta').where('key', 'like', `${key}-%`).count({ n: '*' })).toEqual([{ n: t.db.maxConnections }]);
  });

  it('builds the transaction handle once per connection, without piling listeners on the pool, and reports its queries', async () => {
    const client = t.db.knex.client as { listenerCount(event: string): number };
    const handles = new Set<unknown>();
    let queries = 0;
    const onQuery = () => queries++;
    t.db.knex.on('query', onQuery);
    try {
      // Concurrent, so every pooled connection gets its handle.
      await Promise.all(Array.from({ length: t.db.maxConnections * 2 }, () => beginOrJoin(t.ctx, async (tx) => void handles.add(tx.knex))));
      for (let i = 0; i < 20; i++) await beginOrJoin(t.ctx, async (tx) => void (await tx.knex.raw('SELECT 1')));
      // Only the pool's own knex listens on its client (knex's passthrough of query events).
      expect(client.listenerCount('query')).toBe(1);
      // BEGIN, SELECT, COMMIT of each of the 20, seen by a listener on the pool's knex.
      expect(queries).toBeGreaterThanOrEqual(20 * 3);
    } finally {
      t.db.knex.removeListener('query', onQuery);
    }
    expect(handles.size).toBeLessThanOrEqual(t.db.maxConnections);
  });

  it('lets a writer on another pool in beside an open write transaction exactly where the dialect does not serialise write transactions', async () => {
    // Another pool on the same data, as another process would open it; on SQLite it answers busy at
    // once instead of waiting out the busy timeout.
    const other = createDatabase(t.url, { maxConnections: 1, walCheckpointer: false });
    try {
      if (dialect === 'sqlite') await other.knex.raw('PRAGMA busy_timeout = 0');
      const outcome = await beginOrJoin(t.ctx, async (tx) => {
        await insertMeta(tx.knex, randomUUID());
        return beginOrJoin(createRepositoryContext(other), (beside) => insertMeta(beside.knex, randomUUID())).then(
          () => 'wrote beside it',
          (err: { code?: string }) => err.code,
        );
      });
      expect(outcome).toBe(t.db.dialect.singleWriter ? 'SQLITE_BUSY' : 'wrote beside it');
    } finally {
      await other.destroy();
    }
  });

  if (dialect === 'postgres') {
    it('runs every statement of a transaction on its one connection while others run beside it', async () => {
      const txid = async (knex: TestDatabase['ctx']['knex']) =>
        ((await knex.raw('SELECT txid_current()::text AS id')) as { rows: Array<{ id: string }> }).rows[0]!.id;
      const ids = await Promise.all(
        Array.from({ length: t.db.maxConnections * 2 }, () =>
          beginOrJoin(t.ctx, async (tx) => {
            const first = await txid(tx.knex);
            expect(await txid(tx.knex)).toBe(first);
            return first;
          }),
        ),
      );
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('never lends out again a connection killed mid-transaction: the next transactions run on new ones', async () => {
      const pid = async (knex: TestDatabase['ctx']['knex']) =>
        ((await knex.raw('SELECT pg_backend_pid() AS pid')) as { rows: Array<{ pid: number }> }).rows[0]!.pid;
      let killed = 0;
      const failed = await beginOrJoin(t.ctx, async (tx) => {
        killed = await pid(tx.knex);
        await tx.knex.raw('SELECT pg_terminate_backend(pg_backend_pid())');
      }).catch((err: Error) => err);
      expect(failed).toBeInstanceOf(Error);
      for (let i = 0; i < t.db.maxConnections + 1; i++) {
        const used = await beginOrJoin(t.ctx, (tx) => pid(tx.knex));
        expect(used).not.toBe(killed);
      }
    });
  }

  if (dialect === 'sqlite') {
    it("takes the write lock at BEGIN, so a reading transaction already excludes other processes' writers", async () => {
      const other = new Sqlite(t.url.slice('sqlite:'.length));
      other.pragma('busy_timeout = 0');
      try {
        await beginOrJoin(t.ctx, async (tx) => {
          await tx.knex('kandev_meta').select('key').limit(1);
          expect(() => other.exec('BEGIN IMMEDIATE')).toThrow(/locked|busy/i);
        });
        other.exec('BEGIN IMMEDIATE');
        other.exec('ROLLBACK');
      } finally {
        other.close();
      }
    });
  }
});
