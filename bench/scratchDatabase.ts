/**
 * Scratch databases for the benchmarks and the tests: a migrated, empty database of either dialect
 * that `drop()` removes again. SQLite: a file in a fresh directory under the OS temp dir (another
 * process can open it), or memory; PostgreSQL: a fresh schema of the given server (milliseconds to
 * create), dropped with everything in it.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRepositoryContext, type RepositoryContext } from '../src/repository/context.js';
import { createDatabase, type Database } from '../src/repository/database.js';
import type { DialectName, TimestampForms } from '../src/repository/dialect.js';
import { migrateLatest } from '../src/repository/migrate.js';
import type { Clock } from '../src/timestamps.js';

export interface ScratchDatabase {
  readonly dialect: DialectName;
  readonly db: Database;
  readonly ctx: RepositoryContext;
  /**
   * How another process reaches the same data: the SQLite file, or the PostgreSQL URL with the
   * schema as its search_path.
   */
  readonly url: string;
  /** PostgreSQL: the schema. */
  readonly searchPath?: string;
  /** The file, or the server, schema and pool size, for progress output. */
  readonly where: string;
  /** Closes the pool, then deletes the file or drops the schema. Idempotent. */
  drop(): Promise<void>;
}

export interface ScratchDatabaseOptions {
  /** Required for PostgreSQL. */
  postgresUrl?: string;
  /** SQLite in memory instead of a file (no other process can reach it then). */
  inMemory?: boolean;
  /** PostgreSQL pool size (SQLite always has its one writer). */
  maxConnections?: number;
  /** The repository context's clock (the system clock unless given). */
  clock?: Clock;
  /** Start of the PostgreSQL schema name, so a leftover schema says who made it. */
  schemaPrefix?: string;
  /** What fills the empty database: this service's migrations unless given (tests also build Kandev's schema, or nothing). */
  prepare?: (db: Database) => Promise<unknown>;
  /** The repository context's timestamp forms (canonical text only unless given; detection is the assembly's). */
  timestampForms?: TimestampForms;
}

export async function openScratchDatabase(dialect: DialectName, options: ScratchDatabaseOptions = {}): Promise<ScratchDatabase> {
  let opened: Omit<ScratchDatabase, 'ctx' | 'drop' | 'dialect'> & { remove: () => Promise<void> };
  if (dialect === 'sqlite') {
    const dir = options.inMemory ? undefined : fs.mkdtempSync(path.join(os.tmpdir(), 'pp-scratch-'));
    const url = dir ? `sqlite:${path.join(dir, 'scratch.db')}` : 'sqlite::memory:';
    opened = {
      db: createDatabase(url),
      url,
      where: dir ? path.join(dir, 'scratch.db') : 'memory',
      remove: async () => {
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  } else {
    const serverUrl = options.postgresUrl;
    if (!serverUrl) throw new Error('a PostgreSQL scratch database needs postgresUrl');
    const schema = `${options.schemaPrefix ?? 'scratch_'}${randomUUID().replaceAll('-', '').slice(0, 16)}`;
    await withAdmin(serverUrl, (admin) => admin.knex.raw(`CREATE SCHEMA ${schema}`));
    const db = createDatabase(serverUrl, { searchPath: schema, maxConnections: options.maxConnections });
    opened = {
      db,
      url: `${serverUrl}${serverUrl.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
      searchPath: schema,
      where: `${db.description} schema ${schema} (pool ${db.maxConnections})`,
      remove: () => withAdmin(serverUrl, (admin) => admin.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)),
    };
  }
  const { remove, ...scratch } = opened;
  let dropped: Promise<void> | undefined;
  const drop = () => (dropped ??= scratch.db.destroy().finally(remove));
  try {
    await (options.prepare ?? ((db: Database) => migrateLatest(db.knex)))(scratch.db);
  } catch (err) {
    await drop();
    throw err;
  }
  return { ...scratch, dialect, ctx: createRepositoryContext(scratch.db, options.clock, options.timestampForms), drop };
}

async function withAdmin(url: string, fn: (admin: Database) => Promise<unknown>): Promise<void> {
  const admin = createDatabase(url, { maxConnections: 1 });
  try {
    await fn(admin);
  } finally {
    await admin.destroy();
  }
}
