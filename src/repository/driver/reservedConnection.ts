import type { Knex } from 'knex';
import type { SqlDialect } from '../dialect.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';
import { boundKnex, giveBack, lend, type PooledClient } from './boundKnex.js';

export class ReservationEndedError extends PendingProjectorError {
  override name = 'ReservationEndedError';
  constructor(message: string) {
    super(ERROR_CODES.RESERVATION_ENDED, message);
  }
}

const ended = () => new ReservationEndedError('query through a reserved connection after it went back to the pool');

/**
 * One pooled connection held outside any transaction, so session state (a PostgreSQL session-level
 * advisory lock, a `SET`) lasts from one statement to the next.
 */
export interface ReservedConnection {
  /** Runs one statement on this connection (`?` placeholders) and resolves to its rows. */
  raw<T>(sql: string, bindings?: readonly unknown[]): Promise<T[]>;
  /**
   * The connection may hold session state nobody can take back (a lock whose unlock failed): it is
   * closed now, so the server drops that state at once, and marked so the pool destroys it instead
   * of ever lending it out again. Idempotent; the connection still goes back to the pool when the
   * reservation ends, where it is only counted and then destroyed.
   */
  dispose(reason: unknown): Promise<void>;
  readonly disposed: boolean;
}

/**
 * Runs `fn` with one connection taken from `knex`'s pool and held for it, outside a transaction,
 * then gives the connection back. Statements through it after `fn` settled are refused with
 * ReservationEndedError. It is not a transaction handle: `beginOrJoin` cannot join it, and the
 * caller must leave the session as it found it (or dispose the connection).
 */
export async function withReservedConnection<T>(knex: Knex, dialect: SqlDialect, fn: (connection: ReservedConnection) => Promise<T>): Promise<T> {
  const client = knex.client as PooledClient;
  const connection = await client.acquireConnection();
  const handle = boundKnex(client, connection, 'reserved', ended);
  let disposing: Promise<void> | undefined;
  const reserved: ReservedConnection = {
    async raw<R>(sql: string, bindings: readonly unknown[] = []) {
      return dialect.rawResultRows<R>(await handle.raw(sql, bindings as Knex.RawBinding[]));
    },
    dispose(reason: unknown) {
      disposing ??= (async () => {
        (connection as { __knex__disposed?: unknown }).__knex__disposed = reason ?? 'disposed';
        // Closing an already closed connection resolves at once (pg and better-sqlite3 alike).
        await client.destroyRawConnection(connection).catch(() => undefined);
      })();
      return disposing;
    },
    get disposed() {
      return disposing !== undefined;
    },
  };
  lend(connection, 'reserved');
  try {
    return await fn(reserved);
  } finally {
    giveBack(connection);
    await disposing;
    await client.releaseConnection(connection);
  }
}
