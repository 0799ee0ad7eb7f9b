import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import { createRepositoryContext, type RepositoryContext } from '../src/repository/context.js';
import { createDatabase, type Database } from '../src/repository/database.js';
import type { DialectName } from '../src/repository/dialect.js';
import { migrateLatest } from '../src/repository/migrate.js';
import type { PendingAction } from '../src/turns/pendingAction.js';
import { MESSAGES_PER_SESSION, TURNS_PER_SESSION, planBatch, type Row, type TailShape } from './seedPlan.js';

/**
 * Benchmark databases: a migrated SQLite file under the OS temp dir or a fresh PostgreSQL schema,
 * seeded in bulk from `seedPlan.ts`, and removed again by `drop()` (or `dropAllBenchDatabases()` on
 * a signal or an error).
 */

const SEED_BATCH_SESSIONS = 100;
const SEED_TRANSACTION_SESSIONS = 1000;
// SQLite's SQLITE_MAX_VARIABLE_NUMBER is 32766; PostgreSQL's wire protocol caps a statement at 65535.
const MAX_BINDINGS: Record<DialectName, number> = { sqlite: 32_000, postgres: 65_000 };

export interface BenchDatabase {
  readonly db: Database;
  readonly ctx: RepositoryContext;
  /** The file or the URL and schema, for progress output. */
  readonly where: string;
  /** Closes the pool and deletes the file or drops the schema; idempotent. */
  drop(): Promise<void>;
}

const undropped = new Set<() => Promise<void>>();

/** Drops every benchmark database not dropped yet (signal and error paths). */
export async function dropAllBenchDatabases(): Promise<void> {
  await Promise.allSettled([...undropped].map((drop) => drop()));
}

export async function openBenchDatabase(dialect: DialectName, postgresUrl: string): Promise<BenchDatabase> {
  let db: Database;
  let where: string;
  let remove: () => Promise<void>;
  if (dialect === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-bench-'));
    const file = path.join(dir, 'bench.db');
    db = createDatabase(`sqlite:${file}`);
    where = file;
    remove = async () => fs.rmSync(dir, { recursive: true, force: true });
  } else {
    const schema = `bench_queries_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    await withAdmin(postgresUrl, (admin) => admin.raw(`CREATE SCHEMA ${schema}`));
    db = createDatabase(postgresUrl, { searchPath: schema, maxConnections: 2 });
    where = `${db.description} schema ${schema}`;
    remove = () => withAdmin(postgresUrl, (admin) => admin.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`));
  }
  let dropped: Promise<void> | undefined;
  const drop = () => {
    dropped ??= db.destroy().finally(remove);
    return dropped.finally(() => undropped.delete(drop));
  };
  undropped.add(drop);
  await migrateLatest(db.knex);
  return { db, ctx: createRepositoryContext(db), where, drop };
}

async function withAdmin(url: string, fn: (knex: Knex) => Promise<unknown>): Promise<void> {
  const admin = createDatabase(url, { maxConnections: 1 });
  try {
    await fn(admin.knex);
  } finally {
    await admin.destroy();
  }
}

export interface Seeded {
  /** Every session, in seeding order. */
  sessionIds: string[];
  /** The pending action each session must resolve to, from the independent model in seedPlan.ts. */
  expected: Map<string, PendingAction>;
  tails: Map<TailShape, number>;
  seedMs: number;
  analyzeMs: number;
}

/**
 * Multi-row `INSERT ... VALUES (...), (...)` in chunks that stay under the dialect's binding limit.
 * Built by hand because Knex compiles a multi-row SQLite insert as a UNION ALL of SELECTs, which
 * SQLite caps at 500 terms.
 */
async function insertChunked(trx: Knex.Transaction, table: string, rows: Row[], maxBindings: number): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!);
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const head = `INSERT INTO ${table} (${columns.join(', ')}) VALUES `;
  const perStatement = Math.max(1, Math.floor(maxBindings / columns.length));
  for (let i = 0; i < rows.length; i += perStatement) {
    const chunk = rows.slice(i, i + perStatement);
    const bindings = chunk.flatMap((row) => columns.map((c) => row[c] ?? null));
    await trx.raw(head + chunk.map(() => tuple).join(', '), bindings);
  }
}

/** Seeds `sessions` sessions in transactions of SEED_BATCH_SESSIONS, then runs ANALYZE. */
export async function seedBenchDatabase(bench: BenchDatabase, sessions: number, progress: (line: string) => void): Promise<Seeded> {
  const { knex, dialect } = bench.db;
  const label = `[${dialect.name}]`;
  const result: Seeded = { sessionIds: [], expected: new Map(), tails: new Map(), seedMs: 0, analyzeMs: 0 };
  progress(
    `${label} seeding ${sessions} sessions (${sessions * TURNS_PER_SESSION} turns, ` +
      `${sessions * MESSAGES_PER_SESSION} messages) into ${bench.where}`,
  );
  // The default 2 MB page cache makes inserts into eight random-key indexes thrash; seeding gets a
  // large one, measurements run with the default the application uses.
  if (dialect.name === 'sqlite') await knex.raw('PRAGMA cache_size = -1048576');
  const started = performance.now();
  let nextReport = 0.1;
  // Rows are generated SEED_BATCH_SESSIONS at a time (bounded memory) and committed
  // SEED_TRANSACTION_SESSIONS at a time: random-key indexes dirty pages all over the file, and
  // fewer commits write each page to the WAL fewer times.
  for (let txStart = 0; txStart < sessions; txStart += SEED_TRANSACTION_SESSIONS) {
    const txEnd = Math.min(txStart + SEED_TRANSACTION_SESSIONS, sessions);
    await knex.transaction(async (trx) => {
      for (let start = txStart; start < txEnd; start += SEED_BATCH_SESSIONS) {
        const batch = planBatch(start, Math.min(SEED_BATCH_SESSIONS, txEnd - start));
        await insertChunked(trx, 'tasks', batch.tasks, MAX_BINDINGS[dialect.name]);
        await insertChunked(trx, 'task_sessions', batch.sessions, MAX_BINDINGS[dialect.name]);
        await insertChunked(trx, 'task_session_turns', batch.turns, MAX_BINDINGS[dialect.name]);
        await insertChunked(trx, 'task_session_messages', batch.messages, MAX_BINDINGS[dialect.name]);
        result.sessionIds.push(...batch.sessionIds);
        for (const [id, action] of batch.expected) result.expected.set(id, action);
        for (const [tail, n] of batch.tails) result.tails.set(tail, (result.tails.get(tail) ?? 0) + n);
      }
    });
    const done = txEnd;
    if (done / sessions >= nextReport - 1e-9 || done === sessions) {
      const elapsedS = ((performance.now() - started) / 1000).toFixed(1);
      progress(`${label}   ${done}/${sessions} sessions (${Math.round((done / sessions) * 100)}%) after ${elapsedS}s`);
      while (nextReport <= done / sessions + 1e-9) nextReport += 0.1;
    }
  }
  result.seedMs = performance.now() - started;
  const counts: string[] = [];
  for (const table of ['tasks', 'task_sessions', 'task_session_turns', 'task_session_messages']) {
    const [row] = await knex(table).count({ n: '*' });
    counts.push(`${Number(row?.n)} ${table}`);
  }
  progress(`${label} seeded in ${(result.seedMs / 1000).toFixed(1)}s (${counts.join(', ')}); running ANALYZE`);
  const analyzeStarted = performance.now();
  // PostgreSQL: only this schema's tables. A bare ANALYZE would walk every schema of the shared
  // database, other engineers' included.
  await knex.raw(dialect.name === 'sqlite' ? 'ANALYZE' : 'ANALYZE tasks, task_sessions, task_session_turns, task_session_messages');
  result.analyzeMs = performance.now() - analyzeStarted;
  if (dialect.name === 'sqlite') await knex.raw('PRAGMA cache_size = -2000');
  return result;
}
