import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Sqlite from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { DialectName } from '../../src/repository/dialect.js';
import type { TestDatabase } from '../support/databases.js';

/**
 * The contract between src/repository/driver/ and the knex internals it relies on (listed, with the
 * reasons, in src/repository/driver/README.md). Each test is named after the internal it checks, so
 * a knex upgrade that moves or changes one fails here by name, before it shows as a subtle fault in
 * the transactions, the statement cache or the SQLite client.
 *
 * Only public modules are imported at the top: the repository's own modules require these
 * internals when loaded, so they are imported in the hooks, and a missing path still leaves the
 * per-path tests below to say which one.
 */

const require = createRequire(import.meta.url);
// availableDialects()'s rule, read here because test/support/databases.ts loads the driver.
const DIALECTS: DialectName[] = inject('postgresUrl') ? ['sqlite', 'postgres'] : ['sqlite'];
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DRIVER_DIR = path.join(ROOT, 'src/repository/driver');

type Constructor = abstract new (...args: never[]) => object;

interface PooledClient extends EventEmitter {
  dialect: string;
  acquireConnection(): Promise<object>;
  releaseConnection(connection: object): Promise<void>;
  query(connection: object, query: unknown): Promise<unknown>;
}

const MAKE_KNEX = 'knex/lib/knex-builder/make-knex.js';
const BETTER_SQLITE3_CLIENT = 'knex/lib/dialects/better-sqlite3/index.js';
const SQLITE_TRANSACTION = 'knex/lib/dialects/sqlite3/execution/sqlite-transaction.js';

function methodsOf(prototype: object, names: readonly string[]): Record<string, string> {
  return Object.fromEntries(names.map((name) => [name, typeof (prototype as Record<string, unknown>)[name]]));
}

/** What each required path must export, in the shape the driver uses it. */
const MODULES: Record<string, () => void | Promise<void>> = {
  [MAKE_KNEX]: () => {
    const makeKnex: unknown = require(MAKE_KNEX);
    expect(typeof makeKnex, `${MAKE_KNEX} exports makeKnex(client)`).toBe('function');
  },
  [BETTER_SQLITE3_CLIENT]: async () => {
    const Client = require(BETTER_SQLITE3_CLIENT) as Constructor;
    expect(typeof Client, `${BETTER_SQLITE3_CLIENT} exports the better-sqlite3 client class`).toBe('function');
    expect(
      methodsOf(Client.prototype, ['acquireRawConnection', '_query', 'transaction']),
      `${BETTER_SQLITE3_CLIENT}: the methods the driver overrides or relies on`,
    ).toEqual({
      acquireRawConnection: 'function',
      _query: 'function',
      transaction: 'function',
    });
    const plain = knexFactory({ client: 'better-sqlite3', connection: { filename: ':memory:' }, useNullAsDefault: true });
    try {
      expect(plain.client instanceof Client, `${BETTER_SQLITE3_CLIENT} is the class knex itself uses for client 'better-sqlite3'`).toBe(true);
    } finally {
      await plain.destroy();
    }
  },
  [SQLITE_TRANSACTION]: async () => {
    const Transaction = require(SQLITE_TRANSACTION) as Constructor;
    expect(typeof Transaction, `${SQLITE_TRANSACTION} exports the SQLite transaction class`).toBe('function');
    expect(methodsOf(Transaction.prototype, ['begin', 'query']), `${SQLITE_TRANSACTION}: begin(conn) is overridden, query(conn, sql) is called`).toEqual({
      begin: 'function',
      query: 'function',
    });
    const plain = knexFactory({ client: 'better-sqlite3', connection: { filename: ':memory:' }, useNullAsDefault: true });
    try {
      // knex.transaction(container) returns the transaction object its client's transaction() built.
      const transaction: unknown = plain.transaction(async () => undefined);
      await transaction;
      expect(transaction instanceof Transaction, `${SQLITE_TRANSACTION} is what the better-sqlite3 client's transaction() builds`).toBe(true);
    } finally {
      await plain.destroy();
    }
  },
};

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

describe('the knex version', () => {
  const pinned = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies.knex;

  it('is pinned to one exact version in package.json (the driver relies on knex internals)', () => {
    expect(pinned, 'package.json dependencies.knex must be an exact version, not a range').toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('installed is the pinned one', () => {
    const installed = (require('knex/package.json') as { version: string }).version;
    expect(installed, `node_modules holds knex ${installed}, package.json pins ${pinned}`).toBe(pinned);
  });
});

describe('the knex modules the driver requires', () => {
  it('are required only in src/repository/driver/, and each one is checked here', () => {
    const requiredBy = new Map<string, string[]>();
    for (const file of sourceFiles(path.join(ROOT, 'src'))) {
      for (const match of fs.readFileSync(file, 'utf8').matchAll(/['"](knex\/lib\/[^'"]+)['"]/g)) {
        requiredBy.set(match[1]!, [...(requiredBy.get(match[1]!) ?? []), path.relative(ROOT, file)]);
      }
    }
    const outside = [...requiredBy.values()].flat().filter((file) => !path.resolve(ROOT, file).startsWith(DRIVER_DIR + path.sep));
    expect(outside, 'knex internals are required outside src/repository/driver/').toEqual([]);
    expect([...requiredBy.keys()].sort(), 'every knex path the driver requires has a check in MODULES').toEqual(Object.keys(MODULES).sort());
  });

  it.each(Object.keys(MODULES))('%s resolves and exports what the driver uses', async (modulePath) => {
    expect(() => require.resolve(modulePath), `${modulePath} no longer resolves`).not.toThrow();
    await MODULES[modulePath]!();
  });
});

describe.each(DIALECTS)('the knex internals the driver uses on %s', (dialect) => {
  let t: TestDatabase;
  let client: PooledClient;
  let connectionTransaction: typeof import('../../src/repository/driver/connectionTransaction.js').connectionTransaction;
  beforeAll(async () => {
    const { openTestDatabase } = await import('../support/databases.js');
    ({ connectionTransaction } = await import('../../src/repository/driver/connectionTransaction.js'));
    t = await openTestDatabase(dialect);
    client = t.db.knex.client as unknown as PooledClient;
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Every query `run` issues, as the pool's knex reports them: its SQL and its connection's id. */
  async function queriesOf(run: () => Promise<unknown>): Promise<Array<{ sql: string; __knexUid: string }>> {
    const seen: Array<{ sql: string; __knexUid: string }> = [];
    const onQuery = (query: { sql: string; __knexUid: string }) => seen.push(query);
    t.db.knex.on('query', onQuery);
    try {
      await run();
    } finally {
      t.db.knex.removeListener('query', onQuery);
    }
    return seen;
  }

  it("make-knex runs each query through its client's acquireConnection, query and releaseConnection, and listens on that client only", async () => {
    const makeKnex = require(MAKE_KNEX) as (client: object) => Knex;
    const connection = await client.acquireConnection();
    try {
      const calls: string[] = [];
      const bound = Object.create(client) as PooledClient & { _events: object; _eventsCount: number };
      bound._events = Object.create(null) as object;
      bound._eventsCount = 0;
      bound.acquireConnection = async () => (calls.push('acquireConnection'), connection);
      bound.releaseConnection = async (conn) => void calls.push(conn === connection ? 'releaseConnection' : 'releaseConnection(another connection)');
      bound.query = (conn, query) => (calls.push(conn === connection ? 'query' : 'query(another connection)'), client.query.call(bound, conn, query));
      const poolListeners = client.listenerCount('query');
      await makeKnex(bound).raw('SELECT 1');
      expect(calls, 'the runner calls client.acquireConnection(), client.query(conn, query), client.releaseConnection(conn)').toEqual([
        'acquireConnection',
        'query',
        'releaseConnection',
      ]);
      expect(bound.listenerCount('query'), "make-knex adds its 'query' passthrough to the client it is given").toBe(1);
      expect(client.listenerCount('query'), "a client with its own _events/_eventsCount keeps make-knex's listeners off the pool's client").toBe(poolListeners);
    } finally {
      await client.releaseConnection(connection);
    }
  });

  it("client.transacting makes knex's own transaction on our handle a SAVEPOINT on the same connection", async () => {
    const queries = await queriesOf(() =>
      connectionTransaction(t.db.knex, t.db.dialect, async (trx) => {
        expect(trx.isTransaction, 'our handle carries isTransaction').toBe(true);
        await trx.transaction(async (nested) => nested.raw('SELECT 1'));
      }),
    );
    expect(new Set(queries.map((query) => query.__knexUid)).size, 'every statement ran on the one connection').toBe(1);
    expect(
      queries.map((query) => query.sql.split(/\s/)[0]!.toUpperCase()),
      "knex's Transaction reads client.transacting to choose SAVEPOINT over BEGIN",
    ).toEqual(['BEGIN', 'SAVEPOINT', 'SELECT', 'RELEASE', 'COMMIT']);
  });

  it("knex's own transaction handles carry isTransaction, which beginOrJoin joins on", async () => {
    await t.db.knex.transaction(async (trx) => {
      expect(trx.isTransaction, 'knex sets isTransaction on its transaction handles').toBe(true);
    });
  });

  it('the pool destroys a connection marked __knex__disposed instead of lending it out again', async () => {
    const { openTestDatabase } = await import('../support/databases.js');
    // A database of its own: on SQLite in memory the replaced connection takes the data with it.
    const scratch = await openTestDatabase(dialect);
    try {
      const pool = scratch.db.knex.client as unknown as PooledClient;
      const marked = await pool.acquireConnection();
      (marked as { __knex__disposed?: unknown }).__knex__disposed = new Error('marked by the contract test');
      await pool.releaseConnection(marked);
      const next = await pool.acquireConnection();
      await pool.releaseConnection(next);
      expect(next, 'a connection carrying __knex__disposed was lent out again').not.toBe(marked);
    } finally {
      await scratch.close();
    }
  });

  it('Client#destroyRawConnection closes a connection while it is lent out, and the pool, told by __knex__disposed, replaces it without lending it again', async () => {
    const { openTestDatabase } = await import('../support/databases.js');
    const scratch = await openTestDatabase(dialect);
    try {
      const pool = scratch.db.knex.client as unknown as PooledClient & { destroyRawConnection(connection: object): Promise<void> };
      expect(typeof pool.destroyRawConnection, 'Client#destroyRawConnection(conn), what the pool calls to close a connection').toBe('function');
      const closed = await pool.acquireConnection();
      (closed as { __knex__disposed?: unknown }).__knex__disposed = new Error('closed by the contract test');
      await pool.destroyRawConnection(closed);
      // withReservedConnection releases the closed connection, so the pool's count stays right; its
      // destroy then closes it a second time, which must succeed at once.
      await pool.releaseConnection(closed);
      const next = await pool.acquireConnection();
      await pool.releaseConnection(next);
      expect(next, 'a closed connection carrying __knex__disposed was lent out again').not.toBe(closed);
      expect(
        await scratch.db.knex.raw('SELECT 1 AS one').then((result) => scratch.db.dialect.rawResultRows(result)),
        'the pool serves from a new connection',
      ).toEqual([{ one: 1 }]);
    } finally {
      await scratch.close();
    }
  });

  it('client.dialect names the dialect (the migrations tell the dialects apart by it)', () => {
    expect(client.dialect, 'knex.client.dialect').toBe(dialect === 'sqlite' ? 'sqlite3' : 'postgresql');
  });

  if (dialect === 'sqlite') {
    it('the better-sqlite3 client prepares every query with connection.prepare(sql), the SQL alone, on a better-sqlite3 Database', async () => {
      const connection = (await client.acquireConnection()) as Sqlite.Database;
      const prepares: unknown[][] = [];
      const prepare = connection.prepare;
      try {
        expect(connection instanceof Sqlite, 'acquireRawConnection() resolves to the better-sqlite3 Database the statement cache wraps').toBe(true);
        connection.prepare = ((...args: Parameters<Sqlite.Database['prepare']>) => (
          prepares.push(args),
          prepare.apply(connection, args)
        )) as Sqlite.Database['prepare'];
      } finally {
        await client.releaseConnection(connection);
      }
      try {
        expect(await t.db.knex.raw('SELECT ? AS v', [7])).toEqual([{ v: 7 }]);
        await t.db.knex('kandev_meta').insert({ key: 'contract', value: '1' });
      } finally {
        connection.prepare = prepare;
      }
      expect(prepares, 'Client_BetterSQLite3#_query calls connection.prepare(sql) for each query, reads with all() and writes with run()').toEqual([
        ['SELECT ? AS v'],
        ['insert into `kandev_meta` (`key`, `value`) values (?, ?)'],
      ]);
    });

    it("knex.transaction() opens through Transaction_Sqlite#begin, which the service's client makes BEGIN IMMEDIATE", async () => {
      const queries = await queriesOf(() => t.db.knex.transaction(async (trx) => trx.raw('SELECT 1')));
      expect(
        queries.map((query) => query.sql),
        'Transaction#_onAcquire calls this.begin(conn)',
      ).toEqual(['BEGIN IMMEDIATE', 'SELECT 1', 'COMMIT;']);
    });
  }
});
