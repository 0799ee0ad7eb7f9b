import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, inject } from 'vitest';
import { createDatabase, type Database } from '../../src/repository/database.js';
import { createRepositoryContext, type RepositoryContext } from '../../src/repository/context.js';
import type { DialectName, TimestampForms } from '../../src/repository/dialect.js';
import { migrateLatest } from '../../src/repository/migrate.js';
import { createMonotonicClock, type Clock } from '../../src/timestamps.js';

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
export const DIALECTS: readonly DialectName[] = ['sqlite', 'postgres'];

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
 * Dialects whose service is reachable.
 * @deprecated A loop over this list leaves an unreachable dialect's tests out of the counts; use
 * describeEachDialect, or DIALECTS with isAvailable.
 */
export function availableDialects(): DialectName[] {
  return DIALECTS.filter(isAvailable);
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

/**
 * A migrated, empty database of the given dialect: SQLite in memory, or a fresh PostgreSQL schema
 * (milliseconds to create, dropped on close). `timestampForms` stands in for what detection would
 * find (canonical text only unless given).
 */
export async function openTestDatabase(name: DialectName, clock?: Clock, options: { file?: boolean; timestampForms?: TimestampForms } = {}): Promise<TestDatabase> {
  if (name === 'sqlite') {
    // A file when another process (a spawned worker) must reach the same data.
    const dir = options.file ? fs.mkdtempSync(path.join(os.tmpdir(), 'pp-test-')) : undefined;
    const url = dir ? `sqlite:${path.join(dir, 'test.db')}` : 'sqlite::memory:';
    const db = createDatabase(url);
    await migrateLatest(db.knex);
    return {
      name,
      db,
      ctx: createRepositoryContext(db, clock ?? createMonotonicClock(), options.timestampForms),
      url,
      async close() {
        await db.destroy();
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const url = inject('postgresUrl');
  if (!url) throw new Error('PostgreSQL is not available');
  const schema = `t_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const admin = createDatabase(url, { maxConnections: 1 });
  await admin.knex.raw(`CREATE SCHEMA ${schema}`);
  await admin.destroy();
  const db = createDatabase(url, { searchPath: schema, maxConnections: 8 });
  await migrateLatest(db.knex);
  return {
    name,
    db,
    ctx: createRepositoryContext(db, clock ?? createMonotonicClock(), options.timestampForms),
    // Carries the schema, so a spawned process lands in the same isolated schema.
    url: `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    searchPath: schema,
    async close() {
      await db.destroy();
      const cleanup = createDatabase(url, { maxConnections: 1 });
      await cleanup.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await cleanup.destroy();
    },
  };
}
