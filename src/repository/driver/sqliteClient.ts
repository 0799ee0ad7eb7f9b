import { createRequire } from 'node:module';
import { sqliteDialect } from '../dialect.js';
import { cacheStatements } from './sqliteStatementCache.js';

const require = createRequire(import.meta.url);

type TransactionClass = new (...args: unknown[]) => { query(conn: unknown, sql: string): Promise<unknown> };
// knex ships these classes without type declarations; they are part of its dialect API.
const ClientBetterSQLite3 = require('knex/lib/dialects/better-sqlite3/index.js') as new (...args: unknown[]) => {
  acquireRawConnection(): Promise<{ prepare(sql: string, ...internal: unknown[]): unknown }>;
};
const TransactionSqlite = require('knex/lib/dialects/sqlite3/execution/sqlite-transaction.js') as TransactionClass;

/**
 * `knex.transaction()` on SQLite opens with BEGIN IMMEDIATE too (migrations, tests), for the reason
 * `SqlDialect.beginTransaction` gives; the service's own transactions go through
 * `connectionTransaction`.
 */
class ImmediateTransaction extends TransactionSqlite {
  begin(conn: unknown) {
    return this.query(conn, sqliteDialect.beginTransaction);
  }
}

export class ImmediateBetterSQLite3Client extends ClientBetterSQLite3 {
  override async acquireRawConnection() {
    return cacheStatements(await super.acquireRawConnection());
  }

  transaction(...args: unknown[]) {
    return new ImmediateTransaction(this, ...args);
  }
}
