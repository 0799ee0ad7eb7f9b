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

/**
 * The two ways a repository function runs its statements in a transaction; each names what it does
 * when `ctx` already is one:
 * - `beginOrJoin`: begins a transaction, or runs in the caller's. A throw inside rolls back only if
 *   the caller lets it propagate; its earlier writes commit with the caller's if the caller catches it.
 * - `beginOrNest`: begins a transaction, or takes a savepoint in the caller's, so a throw undoes
 *   exactly what `fn` wrote whatever the caller does with it.
 */
export async function beginOrJoin<T>(ctx: RepositoryContext, fn: (tx: RepositoryContext) => Promise<T>): Promise<T> {
  if (isTransaction(ctx.knex)) return fn(ctx);
  return connectionTransaction(ctx.knex, ctx.dialect, (trx) => fn({ ...ctx, knex: trx }));
}

let savepoints = 0;

/** See `beginOrJoin`. */
export async function beginOrNest<T>(ctx: RepositoryContext, fn: (tx: RepositoryContext) => Promise<T>): Promise<T> {
  if (!isTransaction(ctx.knex)) return beginOrJoin(ctx, fn);
  const name = `pp_nested_${++savepoints}`;
  await ctx.knex.raw(`SAVEPOINT ${name}`);
  let result: T;
  try {
    result = await fn(ctx);
  } catch (err) {
    await ctx.knex.raw(`ROLLBACK TO SAVEPOINT ${name}`);
    await ctx.knex.raw(`RELEASE SAVEPOINT ${name}`);
    throw err;
  }
  await ctx.knex.raw(`RELEASE SAVEPOINT ${name}`);
  return result;
}

/** Whether `knex` is an open transaction (ours or knex's), which `beginOrJoin` joins and `beginOrNest` nests in. */
export function isTransaction(knex: Knex | Knex.Transaction): knex is Knex.Transaction {
  return (knex as Knex.Transaction).isTransaction === true;
}

/** Rows of a raw statement, whichever driver ran it (pg wraps them, better-sqlite3 does not). */
export async function rawRows<T>(ctx: RepositoryContext, sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
  return ctx.dialect.rawResultRows<T>(await ctx.knex.raw(sql, bindings as Knex.RawBinding[]));
}
