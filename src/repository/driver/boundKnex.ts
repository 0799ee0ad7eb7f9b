import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import type { Knex } from 'knex';

const require = createRequire(import.meta.url);
// knex's own builder of a knex instance around a client; shipped without type declarations.
const makeKnex = require('knex/lib/knex-builder/make-knex.js') as (client: Knex.Client) => Knex;

interface EventEmitterState {
  _events: object;
  _eventsCount: number;
}

/** The parts of knex's client the driver calls (see README.md). */
export interface PooledClient extends Knex.Client {
  acquireConnection(): Promise<object>;
  releaseConnection(connection: object): Promise<void>;
  query(connection: object, query: unknown): Promise<unknown>;
  destroyRawConnection(connection: object): Promise<void>;
}

/**
 * How a connection taken from the pool is lent out by this folder: to a transaction of ours
 * (connectionTransaction) or as a reserved connection outside any transaction
 * (withReservedConnection).
 */
export type Lending = 'transaction' | 'reserved';

/** What each held connection is lent out as right now; absent once it went back to the pool. */
const lentAs = new WeakMap<object, Lending>();
/** A knex bound to one pooled connection, per lending, built once and reused while the connection lives. */
const bound: Record<Lending, WeakMap<object, Knex>> = { transaction: new WeakMap(), reserved: new WeakMap() };

export function lend(connection: object, lending: Lending): void {
  lentAs.set(connection, lending);
}

export function giveBack(connection: object): void {
  lentAs.delete(connection);
}

/**
 * The knex bound to `connection` for `lending`: every statement through it runs on that connection,
 * and is refused with `ended()` unless the connection is lent out that way right now (a handle kept
 * past its transaction, or past its reservation, must not run a statement on a connection the pool
 * gave someone else).
 */
export function boundKnex(client: PooledClient, connection: object, lending: Lending, ended: () => Error): Knex {
  let knex = bound[lending].get(connection);
  if (!knex) {
    // Inherits the pool's client (config, driver, dialect methods); only which connection a query
    // runs on changes, and giving the connection back stays with the lender.
    const boundClient = Object.create(client) as PooledClient & EventEmitterState & { transacting: boolean };
    boundClient.transacting = lending === 'transaction';
    // Its own listeners (makeKnex adds four), or they would pile up on the pool's client; and its
    // query events reach the pool's knex too, so a query logger sees these statements as with knex's.
    boundClient._events = Object.create(null) as object;
    boundClient._eventsCount = 0;
    boundClient.emit = (event: string | symbol, ...args: unknown[]) => {
      EventEmitter.prototype.emit.call(boundClient, event, ...args);
      return client.emit(event, ...args);
    };
    boundClient.acquireConnection = () => Promise.resolve(connection);
    boundClient.releaseConnection = () => Promise.resolve();
    boundClient.query = (conn, query) => {
      if (lentAs.get(connection) !== lending) return Promise.reject(ended());
      return client.query.call(boundClient, conn, query);
    };
    knex = makeKnex(boundClient);
    if (lending === 'transaction') (knex as { isTransaction?: boolean }).isTransaction = true;
    bound[lending].set(connection, knex);
  }
  return knex;
}
