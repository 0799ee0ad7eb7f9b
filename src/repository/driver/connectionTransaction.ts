import type { Knex } from 'knex';
import type { SqlDialect } from '../dialect.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';
import { boundKnex, giveBack, lend, type PooledClient } from './boundKnex.js';

export class TransactionEndedError extends PendingProjectorError {
  override name = 'TransactionEndedError';
  constructor(message: string) {
    super(ERROR_CODES.TRANSACTION_ENDED, message);
  }
}

const ended = () => new TransactionEndedError('query through a transaction handle after its transaction ended');

/**
 * Runs `fn` in a transaction on one connection taken from `knex`'s pool: BEGIN (the dialect's),
 * COMMIT when `fn` resolves, ROLLBACK when it throws.
 *
 * Not `knex.transaction()`, which builds a whole knex instance per transaction: here it is built
 * once per pooled connection (the driver README says why).
 *
 * `fn` must not leave queries running after it settles: a query through the handle once its
 * transaction ended fails with TransactionEndedError (as knex's transactions refuse such queries),
 * except while a later transaction holds the same connection, which this cannot tell apart.
 *
 * A connection whose ROLLBACK fails may still hold the open transaction, so it is marked the way
 * knex marks a broken connection, and the pool destroys it instead of lending it out again.
 */
export async function connectionTransaction<T>(knex: Knex, dialect: SqlDialect, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const client = knex.client as PooledClient;
  const connection = await client.acquireConnection();
  try {
    const trx = boundKnex(client, connection, 'transaction', ended) as Knex.Transaction;
    lend(connection, 'transaction');
    await trx.raw(dialect.beginTransaction);
    let result: T;
    try {
      result = await fn(trx);
      await trx.raw('COMMIT');
    } catch (err) {
      await trx.raw('ROLLBACK').catch((rollbackError: unknown) => {
        (connection as { __knex__disposed?: unknown }).__knex__disposed = rollbackError;
      });
      throw err;
    }
    return result;
  } finally {
    giveBack(connection);
    await client.releaseConnection(connection);
  }
}
