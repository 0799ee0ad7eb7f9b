import type { Logger } from 'pino';
import { redactCredentials, redactSecretsOfUrl } from '../redaction.js';
import { createDatabase, DatabaseUrlError, SqliteFileMissingError, type Database } from '../repository/database.js';
import type { Config } from '../config.js';
import { databaseConnectionFailure } from './connectionFailure.js';

/** What opening the database reads; the password file is optional for in-process callers. */
export type DatabaseConfig = Pick<Config, 'databaseUrl' | 'dbMaxConnections'> & Partial<Pick<Config, 'databasePasswordFile'>>;

/**
 * The database pool of `DATABASE_URL`, not connected yet (Knex's warnings go to `logger` when one
 * is given). A URL no dialect takes throws DatabaseUrlError; a file that cannot be made (a SQLite
 * directory without permission) a ConnectionFailedError naming DATABASE_URL. `readOnly` (verify):
 * nothing can be written, and a missing SQLite file throws SqliteFileMissingError instead of being created.
 */
export function openDatabase(config: DatabaseConfig, logger?: Logger, options: { readOnly?: boolean } = {}): Database {
  try {
    return createDatabase(config.databaseUrl, {
      maxConnections: config.dbMaxConnections,
      passwordFile: config.databasePasswordFile || undefined,
      // A failed connect also rejects the statement that asked for it, which reports it (once).
      onWarning: logger ? (message) => !message.startsWith('Acquire connection error') && logger.warn({ component: 'knex' }, message) : undefined,
      readOnly: options.readOnly,
    });
  } catch (err) {
    if (err instanceof DatabaseUrlError || err instanceof SqliteFileMissingError) throw err;
    throw databaseConnectionFailure(err, redactCredentials(config.databaseUrl), (text) => redactSecretsOfUrl(text, config.databaseUrl));
  }
}

/**
 * Runs the database's first statement, so a database that cannot be reached, refuses the login or
 * the TLS, or does not exist, fails here with one ConnectionFailedError naming DATABASE_URL, rather
 * than inside whichever statement came first. The pool is closed when it throws.
 */
export async function probeDatabase(db: Database, url: string): Promise<void> {
  try {
    await db.knex.raw('SELECT 1');
  } catch (err) {
    await db.destroy().catch(() => undefined);
    throw databaseConnectionFailure(err, db.description, (text) => redactSecretsOfUrl(text, url));
  }
}

/** openDatabase, then probeDatabase: a pool that has answered once. */
export async function connectDatabase(config: DatabaseConfig, logger?: Logger): Promise<Database> {
  const db = openDatabase(config, logger);
  await probeDatabase(db, config.databaseUrl);
  return db;
}
