import { describe, inject } from 'vitest';
import { createDatabase, type Database } from '../../src/repository/database.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import type { DialectName, TimestampForms } from '../../src/repository/dialect.js';
import { createKandevSchema } from './kandevSchema.js';
import { createMonotonicClock, type Clock } from '../../src/timestamps.js';
import { openScratchDatabase } from '../../bench/scratchDatabase.js';

export interface TestDatabase {
  readonly name: DialectName;
  readonly db: Database;
  readonly ctx: RepositoryContext;
  /** The URL another process can use to reach the same data (a file, or PostgreSQL + schema). */
  readonly url: string;
  readonly searchPath?: string;
  close(): Promise<void>;
}

/** Every dialect the suite covers, whether or not its service is reachable in this run. */
const DIALECTS: readonly DialectName[] = ['sqlite', 'postgres'];

/** Whether this run reaches the dialect's service; the global setup already failed a run that requires it. */
export function isAvailable(dialect: DialectName): boolean {
  return dialect === 'sqlite' || Boolean(inject('postgresUrl'));
}

/**
 * One describe per dialect in DIALECTS, titled with `%s` replaced by the dialect. A dialect this run
 * cannot reach is skipped rather than left out, so its tests show as skipped in the counts.
 */
export function describeEachDialect(title: string, body: (dialect: DialectName) => void): void {
  for (const dialect of DIALECTS) describe.skipIf(!isAvailable(dialect))(title.replaceAll('%s', dialect), () => body(dialect));
}

/**
 * Another pool on `t`'s data (the same SQLite file, the same PostgreSQL schema). SQLite's pool is one
 * connection, so two parts of a test sharing one Database run one after the other: a read queued
 * behind the worker's projection always sees its outcome. Destroy it before closing `t`.
 */
export function openSecondPool(t: TestDatabase): Database {
  if (t.url === 'sqlite::memory:') throw new Error('an in-memory SQLite database has no second connection: open it with { file: true }');
  return createDatabase(t.url, { searchPath: t.searchPath });
}

/** A scratch database's setup: our migrations (openTestDatabase), or Kandev's schema (openKandevDatabase). */
type Prepare = (db: Database) => Promise<unknown>;

/**
 * A migrated, empty database of the given dialect: SQLite in memory (or a file, when another process
 * must reach the same data), or a fresh PostgreSQL schema (milliseconds to create, dropped on
 * close). The benchmarks open theirs with the same helper. `timestampForms` stands in for what
 * detection would find (canonical text only unless given).
 */
export function openTestDatabase(name: DialectName, clock?: Clock, options: { file?: boolean; timestampForms?: TimestampForms } = {}): Promise<TestDatabase> {
  return openPrepared(name, undefined, clock, options);
}

export interface KandevDatabaseOptions {
  clock?: Clock;
  /** A file (SQLite) when another process, e.g. the CLI, must reach the same data. */
  file?: boolean;
}

/**
 * An empty database of the given dialect as Kandev's backend creates it (test/support/kandevSchema.ts),
 * WITHOUT this service's migrations: none of our tables, indexes or functions. Same isolation as
 * openTestDatabase (an in-memory or temporary SQLite file, a fresh PostgreSQL schema).
 */
export function openKandevDatabase(name: DialectName, options: KandevDatabaseOptions = {}): Promise<TestDatabase> {
  return openPrepared(name, (db) => createKandevSchema(db), options.clock, options);
}

/** A database with nothing in it (not even this service's migrations). */
export function openEmptyDatabase(name: DialectName, options: KandevDatabaseOptions = {}): Promise<TestDatabase> {
  return openPrepared(name, async () => undefined, options.clock, options);
}

/** The benchmarks' scratch database, prepared by `prepare` (this service's migrations by default). */
async function openPrepared(
  name: DialectName,
  prepare: Prepare | undefined,
  clock?: Clock,
  options: { file?: boolean; timestampForms?: TimestampForms } = {},
): Promise<TestDatabase> {
  const postgresUrl = name === 'postgres' ? inject('postgresUrl') : undefined;
  if (name === 'postgres' && !postgresUrl) throw new Error('PostgreSQL is not available');
  const scratch = await openScratchDatabase(name, {
    postgresUrl: postgresUrl ?? undefined,
    inMemory: name === 'sqlite' && !options.file,
    maxConnections: 8,
    clock: clock ?? createMonotonicClock(),
    schemaPrefix: 't_',
    prepare,
    timestampForms: options.timestampForms,
  });
  return { name, db: scratch.db, ctx: scratch.ctx, url: scratch.url, searchPath: scratch.searchPath, close: scratch.drop };
}
