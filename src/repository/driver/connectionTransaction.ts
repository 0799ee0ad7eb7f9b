import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import type { Knex } from 'knex';
import type { SqlDialect } from '../dialect.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';

const require = createRequire(import.meta.url);
// knex's own builder of a knex instance around a client; shipped without type declarations.
const makeKnex = require('knex/lib/knex-builder/make-knex.js') as (client: Knex.Client) => Knex;

interface EventEmitterState {
  _events: object;
  _eventsCount: number;
}

interface PooledClient extends Knex.Client {
  acquireConnection(): Promise<object>;
  releaseConnection(connection: object): Promise<void>;
  query(connection: object, query: unknown): Promise<unknown>;
}

export class TransactionEndedError extends PendingProjectorError {
  override name = 'TransactionEndedError';
  constructor(message: string) {
    super(ERROR_CODES.TRANSACTION_ENDED, message);
  }
}

/** A knex bound to one pooled connection, built once per connection and reused by its transactions. */
const boundKnexes = new WeakMap<object, Knex>();
/** Connections a transaction of ours holds right now. */
const inTransaction = new WeakSet<object>();

/**
 * Runs `fn` in a transaction on one connection taken from `knex`'s pool: BEGIN (the dialect's),
 * COMMIT when `fn` resolves, ROLLBACK when it throws.
 *
 * Why not `knex.transaction()`: knex builds a whole knex instance (a client copy with its event
 * wiring, and a callable with every query method redefined on it) for every transaction. At the
 * worker's rate that was over a third of the objects surviving young-generation GC, and so of the
 * major GCs that land in the latency tail. Here that instance is built once per pooled connection
 * and kept as long as the connection lives.
 *
 * `fn` must not leave queries running after it settles: a query through the handle once its
 * transaction ended fails with TransactionEndedError (as knex's transactions refuse such queries),
 * except while a later transaction holds the same connection, which this cannot tell apart.
 *
 * A connection whose ROLLBACK fails may still hold the open transaction, so it is marked the way
 * knex marks a broken connection, and the pool destroys it instead of lending it out again.
 */
export async function connectionTransaction<T>(
  knex: Knex,
  dialect: SqlDialect,
  fn: (trx: Knex.Transaction) => Promise<T>,
): Promise<T> {
  const client = knex.client as PooledClient;
  const connection = await client.acquireConnection();
  try {
    const trx = boundKnex(client, connection);
    inTransaction.add(connection);
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
    inTransaction.delete(connection);
    await client.releaseConnection(connection);
  }
}

function boundKnex(client: PooledClient, connection: object): Knex.Transaction {
  let bound = boundKnexes.get(connection);
  if (!bound) {
    // Inherits the pool's client (config, driver, dialect methods); only which connection a query
    // runs on changes, and giving the connection back stays with connectionTransaction.
    const boundClient = Object.create(client) as PooledClient & EventEmitterState & { transacting: boolean };
    boundClient.transacting = true;
    // Its own listeners (makeKnex adds four), or they would pile up on the pool's client; and its
    // query events reach the pool's knex too, so a query logger sees transactions as with knex's.
    boundClient._events = Object.create(null) as object;
    boundClient._eventsCount = 0;
    boundClient.emit = (event: string | symbol, ...args: unknown[]) => {
      EventEmitter.prototype.emit.call(boundClient, event, ...args);
      return client.emit(event, ...args);
    };
    boundClient.acquireConnection = () => Promise.resolve(connection);
    boundClient.releaseConnection = () => Promise.resolve();
    boundClient.query = (conn, query) => {
      if (!inTransaction.has(connection)) return Promise.reject(new TransactionEndedError('query through a transaction handle after its transaction ended'));
      return client.query.call(boundClient, conn, query);
    };
    bound = makeKnex(boundClient);
    (bound as { isTransaction?: boolean }).isTransaction = true;
    boundKnexes.set(connection, bound);
  }
  return bound as Knex.Transaction;
}
