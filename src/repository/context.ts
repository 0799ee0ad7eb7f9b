import type { Knex } from 'knex';
import { connectionTransaction } from './driver/connectionTransaction.js';
import type { Database } from './database.js';
import { withTimestampForms, type SqlDialect, type TimestampForms } from './dialect.js';
import { systemClock, type Clock } from '../timestamps.js';

/**
 * What every repository function runs against: a Knex instance or an open transaction, the
 * dialect it speaks (with the database's timestamp forms, see `detectTimestampForms`), and the clock
 * that stamps writes (injectable, so tests can pin time).
 */
export interface RepositoryContext {
  readonly knex: Knex | Knex.Transaction;
  readonly dialect: SqlDialect;
  readonly clock: Clock;
}

/** `forms` omitted: canonical text only, as in a database this service created and alone writes. */
export function createRepositoryContext(db: Database, clock: Clock = systemClock, forms?: TimestampForms): RepositoryContext {
  return { knex: db.knex, dialect: forms ? withTimestampForms(db.dialect, forms) : db.dialect, clock };
}

/** The clock's now, as this database's Kandev-owned tables store timestamps. */
export function storedNow(ctx: RepositoryContext): string {
  return ctx.dialect.storedTimestamp(ctx.clock());
}

/** Runs `fn` in one transaction (joining the caller's if `ctx` already is one). */
export async function withTransaction<T>(ctx: RepositoryContext, fn: (tx: RepositoryContext) => Promise<T>): Promise<T> {
  if (isTransaction(ctx.knex)) return fn(ctx);
  return connectionTransaction(ctx.knex, ctx.dialect, (trx) => fn({ ...ctx, knex: trx }));
}

/** Whether `knex` is an open transaction (ours or knex's), which `withTransaction` joins. */
export function isTransaction(knex: Knex | Knex.Transaction): knex is Knex.Transaction {
  return (knex as Knex.Transaction).isTransaction === true;
}

/** Rows of a raw statement, whichever driver ran it (pg wraps them, better-sqlite3 does not). */
export async function rawRows<T>(ctx: RepositoryContext, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  return ctx.dialect.rawResultRows<T>(await ctx.knex.raw(sql, bindings as Knex.RawBinding[]));
}
