import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

type TransactionClass = new (...args: unknown[]) => { query(conn: unknown, sql: string): Promise<unknown> };
// knex ships these classes without type declarations; they are part of its dialect API.
const ClientBetterSQLite3 = require('knex/lib/dialects/better-sqlite3/index.js') as new (...args: unknown[]) => object;
const TransactionSqlite = require('knex/lib/dialects/sqlite3/execution/sqlite-transaction.js') as TransactionClass;

/**
 * SQLite transactions that take the write lock at BEGIN. A deferred transaction that reads first and
 * writes later cannot wait for another process's writer: SQLite fails the upgrade at once with
 * "database is locked" (busy_timeout does not apply, to avoid deadlock). Every transaction of this
 * service may write, so IMMEDIATE lets busy_timeout queue it behind the other writer instead.
 */
class ImmediateTransaction extends TransactionSqlite {
  begin(conn: unknown) {
    return this.query(conn, 'BEGIN IMMEDIATE;');
  }
}

export class ImmediateBetterSQLite3Client extends ClientBetterSQLite3 {
  transaction(...args: unknown[]) {
    return new ImmediateTransaction(this, ...args);
  }
}
