import type { Knex } from 'knex';
import { withTransaction, type RepositoryContext } from './context.js';

let savepoints = 0;

/**
 * Runs `fn` so that a throw undoes exactly what `fn` wrote: its own transaction, or, when `ctx` is
 * already a transaction (a caller's mutation scope), a savepoint inside it. `withTransaction` alone
 * joins the caller's transaction, where a throw that the caller catches would leave `fn`'s earlier
 * writes to be committed with everything else.
 */
export async function atomically<T>(ctx: RepositoryContext, fn: (tx: RepositoryContext) => Promise<T>): Promise<T> {
  if ((ctx.knex as Knex.Transaction).isTransaction !== true) return withTransaction(ctx, fn);
  const name = `pp_atomic_${++savepoints}`;
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
