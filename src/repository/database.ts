import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { dialectFor, type SqlDialect } from './dialect.js';
import { ImmediateBetterSQLite3Client } from './driver/sqliteClient.js';
import { startSqliteCheckpointer, type SqliteCheckpointer, type SqliteCheckpointerOptions } from './driver/sqliteCheckpointer.js';
import { redactCredentials } from '../redaction.js';
import { DEFAULT_DATABASE_URL } from '../settingValues.js';
import { toCanonicalTimestamp } from '../timestamps.js';
import { DatabaseUrlError } from './databaseUrlError.js';
import { SqliteFileMissingError } from './sqliteFileMissingError.js';
import { readOnlyLeftovers } from './sqliteReadOnlyLeftovers.js';
import { postgresConnection, readPasswordFile } from './postgresConnection.js';

/** An open database: the Knex instance plus the dialect capabilities every query is built with. */
export interface Database {
  readonly knex: Knex;
  readonly dialect: SqlDialect;
  /** The URL with its credentials masked (redactCredentials), for logs and progress output. */
  readonly description: string;
  /** Connections the pool opens at most (SQLite: 1, its single writer). */
  readonly maxConnections: number;
  /** SQLite file databases: the file's absolute path (the worker locks it: sqliteWorkerLock.ts). */
  readonly sqliteFile?: string;
  /** SQLite file databases: the thread that checkpoints the WAL, once the first connection opened. */
  readonly walCheckpointer?: SqliteCheckpointer;
  destroy(): Promise<void>;
}

export interface DatabaseOptions {
  /** PostgreSQL schema to use instead of `public` (tests isolate each file in its own schema). */
  searchPath?: string;
  /** PostgreSQL pool size; the SQLite pool is always one connection, its single writer. */
  maxConnections?: number;
  /** Receives Knex's own warnings. Its connection errors are not logged: they reject the query. */
  onWarning?: (message: string) => void;
  /** Starts the SQLite WAL checkpointer thread (tests inject one that fails); `false` leaves checkpoints to SQLite. */
  walCheckpointer?: false | ((options: SqliteCheckpointerOptions) => SqliteCheckpointer);
  /**
   * Opens the database so that nothing can be written (`doctor`, `verify`): SQLite read-only, with
   * no journal-mode change and no checkpointer, throwing SqliteFileMissingError for a file that does
   * not exist instead of creating it (or its directory), and removing the `-wal`/`-shm` files the
   * read left once it closes (sqliteReadOnlyLeftovers.ts); PostgreSQL sessions with
   * `default_transaction_read_only`, so a write statement fails.
   */
  readOnly?: boolean;
  /**
   * PostgreSQL: a file holding the password (DATABASE_PASSWORD_FILE), read once here. Without it
   * the password is the URL's, else the driver's own PGPASSWORD.
   */
  passwordFile?: string;
}

function knexLog(options: DatabaseOptions) {
  const ignore = () => undefined;
  return { warn: (m: unknown) => options.onWarning?.(String(m)), error: ignore, deprecate: (m: unknown) => options.onWarning?.(String(m)), debug: ignore };
}

const DEFAULT_PG_MAX_CONNECTIONS = 10;
// SQLite's own default for wal_autocheckpoint (pages), restored if the checkpointer thread stops.
const SQLITE_DEFAULT_AUTOCHECKPOINT = 1000;

const TIMESTAMP_OID = 1114;
const TIMESTAMPTZ_OID = 1184;
const INT8_OID = 20;

// Per-client parsers instead of pg.types.setTypeParser, so embedding applications keep their own.
// Timestamps stay text in the canonical form: a JS Date would drop microseconds and break ties.
const pgTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === TIMESTAMP_OID || oid === TIMESTAMPTZ_OID) {
      return (value: string) => toCanonicalTimestamp(value.replace(/([+-]00)(:?00)?$/, 'Z'));
    }
    if (oid === INT8_OID) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export { DatabaseUrlError, SqliteFileMissingError };

/**
 * Parses `sqlite:<path>`, `sqlite::memory:` or `postgres://...` and opens a pool. Every command
 * opens its database here, so each honours the URL's TLS parameters (libpq's `sslmode` and
 * `sslrootcert`, see postgresConnection.ts) and the password file alike.
 */
export function createDatabase(url: string = DEFAULT_DATABASE_URL, options: DatabaseOptions = {}): Database {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    const password = options.passwordFile ? readPasswordFile(options.passwordFile) : undefined;
    const { connectionString, ssl } = postgresConnection(url, { password });
    const knex = knexFactory({
      client: 'pg',
      connection: { connectionString, ssl, types: pgTypes } as Knex.PgConnectionConfig,
      searchPath: options.searchPath ? [options.searchPath] : undefined,
      log: knexLog(options),
      pool: {
        min: 0,
        max: options.maxConnections ?? DEFAULT_PG_MAX_CONNECTIONS,
        // JIT compilation of the batched pending-action statement costs more (about 0.5 s) than
        // running it; this service issues short OLTP statements only.
        afterCreate(conn: pg.Client, done: (err: Error | null, conn: pg.Client) => void) {
          conn.query(options.readOnly ? 'SET jit = off; SET default_transaction_read_only = on' : 'SET jit = off').then(
            () => done(null, conn),
            (err: Error) => done(err, conn),
          );
        },
      },
    });
    // The URL as reports print it (migrate, doctor): masked by the one rule, `?password=` included.
    return wrap(knex, 'postgres', redactCredentials(url), options.maxConnections ?? DEFAULT_PG_MAX_CONNECTIONS);
  }
  if (url.startsWith('sqlite:')) {
    if (options.passwordFile) throw new DatabaseUrlError('DATABASE_PASSWORD_FILE is set, but a SQLite DATABASE_URL takes no password');
    const filename = url.slice('sqlite:'.length);
    if (filename === '') throw new DatabaseUrlError('DATABASE_URL "sqlite:" needs a path, e.g. sqlite:./data/pending-projector.db');
    const memory = filename === ':memory:';
    // An in-memory database is private to its connection: there is nothing another process could see written.
    const readOnly = options.readOnly === true && !memory;
    if (readOnly && !fs.existsSync(filename)) throw new SqliteFileMissingError(url, path.resolve(filename));
    if (!memory && !readOnly) fs.mkdirSync(path.dirname(path.resolve(filename)), { recursive: true });
    const leftovers = readOnly ? readOnlyLeftovers(filename) : undefined;
    const startCheckpointer = memory || readOnly || options.walCheckpointer === false ? undefined : (options.walCheckpointer ?? startSqliteCheckpointer);
    let checkpointer: SqliteCheckpointer | undefined;
    const knex = knexFactory({
      client: ImmediateBetterSQLite3Client as unknown as typeof knexFactory.Client,
      // SQLite's read-only open never creates the file, even if it went away since the check above.
      connection: readOnly ? { filename, options: { readonly: true } } : { filename },
      useNullAsDefault: true,
      log: knexLog(options),
      // One connection: SQLite has one writer, and Kandev relies on that to serialise turn writes.
      pool: {
        min: 1,
        max: 1,
        afterCreate(conn: { pragma(sql: string): unknown }, done: (err: Error | null, conn: unknown) => void) {
          try {
            conn.pragma('foreign_keys = ON');
            conn.pragma('busy_timeout = 5000');
            if (!memory && !readOnly) {
              conn.pragma('journal_mode = WAL');
              conn.pragma('synchronous = NORMAL');
            }
            if (startCheckpointer) {
              // Started once the file exists in WAL mode; a replacement connection keeps the thread.
              checkpointer ??= startCheckpointer({
                filename,
                onExit(error) {
                  options.onWarning?.(`SQLite WAL checkpointer stopped (${error.message}); the connection checkpoints by itself again`);
                  knex.raw(`PRAGMA wal_autocheckpoint = ${SQLITE_DEFAULT_AUTOCHECKPOINT}`).catch(() => undefined);
                },
              });
              conn.pragma(`wal_autocheckpoint = ${checkpointer.running ? 0 : SQLITE_DEFAULT_AUTOCHECKPOINT}`);
            }
            done(null, conn);
          } catch (err) {
            done(err as Error, conn);
          }
        },
      },
    });
    return wrap(
      knex,
      'sqlite',
      url,
      1,
      () => checkpointer,
      () => leftovers?.tidy(),
      memory ? undefined : path.resolve(filename),
    );
  }
  throw new DatabaseUrlError(`unsupported DATABASE_URL ${JSON.stringify(url)}: use sqlite:<path>, sqlite::memory: or postgres://user@host:port/db`);
}

function wrap(
  knex: Knex,
  name: 'sqlite' | 'postgres',
  description: string,
  maxConnections: number,
  checkpointer: () => SqliteCheckpointer | undefined = () => undefined,
  afterClose: () => void = () => undefined,
  sqliteFile?: string,
): Database {
  let destroyed: Promise<void> | undefined;
  return {
    knex,
    dialect: dialectFor(name),
    description,
    maxConnections,
    sqliteFile,
    get walCheckpointer() {
      return checkpointer();
    },
    destroy() {
      // The pool first: the checkpointer's connection is then the last one, and closing it
      // checkpoints and removes the WAL.
      destroyed ??= knex.destroy().then(async () => {
        await checkpointer()?.stop();
        afterClose();
      });
      return destroyed;
    },
  };
}
