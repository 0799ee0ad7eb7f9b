import type { Logger } from 'pino';
import { ConfigError } from '../config.js';
import type { Database } from '../repository/database.js';
import { DatabaseUrlError } from '../repository/database.js';
import { openDatabase, type DatabaseConfig } from './connectDatabase.js';
import { prepareNats, type PreparedNats } from './connectNats.js';
import type { NatsClientSettings } from './natsConnectionOptions.js';

/**
 * Checks the settings of both connections of a command before either is made: one ConfigError
 * lists the problems of NATS and of DATABASE_URL together, so a bad `sslmode` is reported as such
 * even while NATS is down. Returns the pool, not connected yet, and the NATS settings ready to connect.
 */
export function prepareConnections(config: DatabaseConfig & NatsClientSettings, logger?: Logger): { db: Database; nats: PreparedNats } {
  const problems: string[] = [];
  let nats: PreparedNats | undefined;
  try {
    nats = prepareNats(config);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems);
  }
  let db: Database | undefined;
  try {
    db = openDatabase(config, logger);
  } catch (err) {
    if (!(err instanceof DatabaseUrlError)) throw err;
    problems.push(err.message);
  }
  if (problems.length > 0 || !nats || !db) {
    void db?.destroy();
    throw new ConfigError(problems);
  }
  return { db, nats };
}
