/**
 * Query benchmark: the windowed pending-action statement against the per-session loop it replaces,
 * on SQLite (temp file) and PostgreSQL (a fresh schema), measured in one run and printed as ratios.
 *
 *   npm run bench:queries -- [--dialect sqlite|postgres|both] [--sessions 10000] [--repeat 5]
 *                            [--loop-budget-ms 60000] [--explain-analyze]
 *
 * PostgreSQL URL: BENCH_POSTGRES_URL, else POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/test.
 * Progress goes to stderr, results to stdout. A missed target prints FAIL and still exits 0; a wrong
 * answer (loop, window and the independent model disagree) or any error exits 1.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Knex } from 'knex';
import { createRepositoryContext, rawRows, type RepositoryContext } from '../src/repository/context.js';
import { createDatabase, type Database } from '../src/repository/database.js';
import type { DialectName } from '../src/repository/dialect.js';
import { migrateLatest } from '../src/repository/migrate.js';
import { getPendingActionsBySessionIds, pendingActionsStatement } from '../src/repository/pendingActions.js';
import type { PendingAction } from '../src/turns/pendingAction.js';
import { MESSAGES_PER_SESSION, TURNS_PER_SESSION, createRng, planBatch, type Row, type TailShape } from './seedPlan.js';

const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const SAMPLE_SESSIONS = 1000;
const SEED_BATCH_SESSIONS = 100;
// SQLite's SQLITE_MAX_VARIABLE_NUMBER is 32766; PostgreSQL's wire protocol caps a statement at 65535.
const MAX_BINDINGS: Record<DialectName, number> = { sqlite: 32_000, postgres: 65_000 };
const TARGET_LOOP_OVER_WINDOW = 5;
const TARGET_SCALING = 12;

interface Options {
  dialects: DialectName[];
  sessions: number;
  repeat: number;
  loopBudgetMs: number;
  explainAnalyze: boolean;
  postgresUrl: string;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      dialect: { type: 'string', default: 'both' },
      sessions: { type: 'string', default: '10000' },
      repeat: { type: 'string', default: '5' },
      'loop-budget-ms': { type: 'string', default: '60000' },
      'explain-analyze': { type: 'boolean', default: false },
    },
    strict: true,
  });
  const problems: string[] = [];
  const dialect = values.dialect;
  if (dialect !== 'sqlite' && dialect !== 'postgres' && dialect !== 'both') problems.push(`--dialect must be sqlite, postgres or both (got ${dialect})`);
  const int = (name: string, raw: string, min: number) => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) problems.push(`--${name} must be an integer >= ${min} (got ${raw})`);
    return n;
  };
  const sessions = int('sessions', values.sessions, 2);
  const repeat = int('repeat', values.repeat, 1);
  const loopBudgetMs = int('loop-budget-ms', values['loop-budget-ms'], 0);
  if (problems.length > 0) throw new Error(`bad arguments:\n  ${problems.join('\n  ')}`);
  return {
    dialects: dialect === 'both' ? ['sqlite', 'postgres'] : [dialect as DialectName],
    sessions,
    repeat,
    loopBudgetMs,
    explainAnalyze: values['explain-analyze'],
    postgresUrl: process.env.BENCH_POSTGRES_URL ?? process.env.POSTGRES_URL ?? DEFAULT_POSTGRES_URL,
  };
}

const progress = (line: string) => process.stderr.write(`${line}\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

// ---------------------------------------------------------------------------------------------
// Databases: a temp SQLite file or a fresh PostgreSQL schema, both removed by `drop()`.

interface BenchDatabase {
  db: Database;
  ctx: RepositoryContext;
  where: string;
  drop(): Promise<void>;
}

const pendingDrops = new Set<() => Promise<void>>();

async function openBenchDatabase(dialect: DialectName, options: Options): Promise<BenchDatabase> {
  let drop: () => Promise<void>;
  let db: Database;
  let where: string;
  if (dialect === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pp-bench-'));
    const file = path.join(dir, 'bench.db');
    db = createDatabase(`sqlite:${file}`);
    where = file;
    drop = async () => {
      await db.destroy();
      fs.rmSync(dir, { recursive: true, force: true });
    };
  } else {
    const schema = `bench_queries_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const admin = createDatabase(options.postgresUrl, { maxConnections: 1 });
    try {
      await admin.knex.raw(`CREATE SCHEMA ${schema}`);
    } finally {
      await admin.destroy();
    }
    db = createDatabase(options.postgresUrl, { searchPath: schema, maxConnections: 2 });
    where = `${db.description} schema ${schema}`;
    drop = async () => {
      await db.destroy();
      const cleanup = createDatabase(options.postgresUrl, { maxConnections: 1 });
      try {
        await cleanup.knex.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await cleanup.destroy();
      }
    };
  }
  let dropped: Promise<void> | undefined;
  const once = () => (dropped ??= drop());
  pendingDrops.add(once);
  await migrateLatest(db.knex);
  return {
    db,
    ctx: createRepositoryContext(db),
    where,
    drop: async () => {
      await once();
      pendingDrops.delete(once);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Seeding

interface Seeded {
  sessionIds: string[];
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

async function seed(bench: BenchDatabase, sessions: number): Promise<Seeded> {
  const { knex, dialect } = bench.db;
  const label = `[${dialect.name}]`;
  const result: Seeded = { sessionIds: [], expected: new Map(), tails: new Map(), seedMs: 0, analyzeMs: 0 };
  progress(`${label} seeding ${sessions} sessions (${sessions * TURNS_PER_SESSION} turns, ${sessions * MESSAGES_PER_SESSION} messages) into ${bench.where}`);
  // The default 2 MB page cache makes inserts into eight random-key indexes thrash; seeding gets a
  // large one, measurements run with the default the application uses.
  if (dialect.name === 'sqlite') await knex.raw('PRAGMA cache_size = -262144');
  const started = performance.now();
  let nextReport = 0.1;
  for (let start = 0; start < sessions; start += SEED_BATCH_SESSIONS) {
    const batch = planBatch(start, Math.min(SEED_BATCH_SESSIONS, sessions - start));
    await knex.transaction(async (trx) => {
      for (const [table, rows] of [
        ['tasks', batch.tasks],
        ['task_sessions', batch.sessions],
        ['task_session_turns', batch.turns],
        ['task_session_messages', batch.messages],
      ] as const) {
        await insertChunked(trx, table, rows, MAX_BINDINGS[dialect.name]);
      }
    });
    result.sessionIds.push(...batch.sessionIds);
    for (const [id, action] of batch.expected) result.expected.set(id, action);
    for (const [tail, n] of batch.tails) result.tails.set(tail, (result.tails.get(tail) ?? 0) + n);
    const done = start + batch.sessionIds.length;
    if (done / sessions >= nextReport - 1e-9 || done === sessions) {
      progress(`${label}   ${done}/${sessions} sessions (${Math.round((done / sessions) * 100)}%) after ${seconds(performance.now() - started)}`);
      while (nextReport <= done / sessions + 1e-9) nextReport += 0.1;
    }
  }
  result.seedMs = performance.now() - started;
  progress(`${label} seeded in ${seconds(result.seedMs)}; running ANALYZE`);
  const analyzeStarted = performance.now();
  // PostgreSQL: only this schema's tables. A bare ANALYZE would walk every schema of the shared
  // database, other engineers' included.
  await knex.raw(dialect.name === 'sqlite' ? 'ANALYZE' : 'ANALYZE tasks, task_sessions, task_session_turns, task_session_messages');
  result.analyzeMs = performance.now() - analyzeStarted;
  if (dialect.name === 'sqlite') await knex.raw('PRAGMA cache_size = -2000');
  return result;
}

// ---------------------------------------------------------------------------------------------
// Measuring

interface Timing {
  medianMs: number;
  minMs: number;
  maxMs: number;
  runs: number;
  extrapolated?: boolean;
}

async function timed<T>(runs: number, fn: () => Promise<T>): Promise<{ timing: Timing; last: T }> {
  const samples: number[] = [];
  let last: T | undefined;
  for (let i = 0; i < runs; i += 1) {
    const started = performance.now();
    last = await fn();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  const mid = Math.floor(samples.length / 2);
  const medianMs = samples.length % 2 === 1 ? samples[mid]! : (samples[mid - 1]! + samples[mid]!) / 2;
  return { timing: { medianMs, minMs: samples[0]!, maxMs: samples[samples.length - 1]!, runs }, last: last as T };
}

/** The N+1 shape the windowed statement replaces: one call per session, results merged. */
async function perSessionLoop(ctx: RepositoryContext, sessionIds: readonly string[]): Promise<Map<string, PendingAction>> {
  const merged = new Map<string, PendingAction>();
  for (const id of sessionIds) {
    for (const [sessionId, action] of await getPendingActionsBySessionIds(ctx, [id])) merged.set(sessionId, action);
  }
  return merged;
}

class WrongAnswerError extends Error {
  override name = 'WrongAnswerError';
  readonly code = 'BENCH_WRONG_ANSWER';
}

function assertSameMap(what: string, actual: Map<string, PendingAction>, expected: Map<string, PendingAction>): void {
  const diffs: string[] = [];
  for (const id of new Set([...actual.keys(), ...expected.keys()])) {
    if (actual.get(id) !== expected.get(id)) diffs.push(`${id}: got ${actual.get(id) ?? 'none'}, expected ${expected.get(id) ?? 'none'}`);
  }
  if (diffs.length > 0) {
    throw new WrongAnswerError(`${what}: ${diffs.length} sessions differ, e.g.\n  ${diffs.slice(0, 8).join('\n  ')}`);
  }
}

function restrict(map: Map<string, PendingAction>, ids: readonly string[]): Map<string, PendingAction> {
  const out = new Map<string, PendingAction>();
  for (const id of ids) {
    const action = map.get(id);
    if (action) out.set(id, action);
  }
  return out;
}

function sampleOf(ids: readonly string[], size: number): string[] {
  const rng = createRng(0x1000);
  const shuffled = [...ids];
  for (let i = shuffled.length - 1; i > 0; i -= 1) {
    const j = Math.floor(rng() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
  }
  return shuffled.slice(0, size);
}

async function explain(ctx: RepositoryContext, sessionIds: readonly string[], analyze: boolean): Promise<string[]> {
  const { sql, bindings } = pendingActionsStatement(ctx.dialect, sessionIds);
  if (ctx.dialect.name === 'postgres') {
    const prefix = analyze ? 'EXPLAIN (ANALYZE, BUFFERS)' : 'EXPLAIN';
    const rows = await rawRows<{ 'QUERY PLAN': string }>(ctx, `${prefix} ${sql}`, bindings);
    return rows.map((r) => r['QUERY PLAN']);
  }
  const rows = await rawRows<{ id: number; parent: number; detail: string }>(ctx, `EXPLAIN QUERY PLAN ${sql}`, bindings);
  const depth = new Map<number, number>([[0, -1]]);
  return rows.map((r) => {
    const d = (depth.get(r.parent) ?? -1) + 1;
    depth.set(r.id, d);
    return `${'  '.repeat(d)}${r.detail}`;
  });
}

function indexesIn(plan: readonly string[]): string[] {
  const found = new Set<string>();
  for (const line of plan) for (const m of line.matchAll(/\b(idx_\w+|\w+_pkey|sqlite_autoindex_\w+)\b/g)) found.add(m[1]!);
  return [...found].sort();
}

interface DialectReport {
  dialect: DialectName;
  sessions: number;
  sample: number;
  seedMs: number;
  analyzeMs: number;
  windowedSample: Timing;
  windowedAll: Timing;
  loopSample: Timing;
  loopAll: Timing;
  actions: { clarification: number; permission: number };
  plan: string[];
}

async function benchDialect(dialect: DialectName, options: Options): Promise<DialectReport> {
  const label = `[${dialect}]`;
  const bench = await openBenchDatabase(dialect, options);
  try {
    const seeded = await seed(bench, options.sessions);
    const { ctx } = bench;
    const all = seeded.sessionIds;
    const sample = sampleOf(all, Math.min(SAMPLE_SESSIONS, all.length));

    progress(`${label} warm-up`);
    assertSameMap('windowed (all sessions) vs independent model', await getPendingActionsBySessionIds(ctx, all), seeded.expected);
    await getPendingActionsBySessionIds(ctx, sample);
    await perSessionLoop(ctx, sample.slice(0, 100));

    progress(`${label} windowed x ${sample.length} sessions, ${options.repeat + 2} runs`);
    const windowedSample = await timed(options.repeat + 2, () => getPendingActionsBySessionIds(ctx, sample));
    assertSameMap(`windowed (${sample.length}) vs independent model`, windowedSample.last, restrict(seeded.expected, sample));
    progress(`${label} windowed x ${all.length} sessions, ${options.repeat} runs`);
    const windowedAll = await timed(options.repeat, () => getPendingActionsBySessionIds(ctx, all));
    assertSameMap(`windowed (${all.length}) vs independent model`, windowedAll.last, seeded.expected);

    const loopRuns = Math.max(1, Math.ceil(options.repeat / 2));
    progress(`${label} per-session loop x ${sample.length} sessions, ${loopRuns} runs`);
    const loopSample = await timed(loopRuns, () => perSessionLoop(ctx, sample));
    assertSameMap(`per-session loop (${sample.length}) vs windowed`, loopSample.last, windowedSample.last);

    let loopAll: Timing;
    const estimateMs = loopSample.timing.medianMs * (all.length / sample.length);
    if (all.length === sample.length) {
      loopAll = loopSample.timing;
    } else if (estimateMs <= options.loopBudgetMs) {
      progress(`${label} per-session loop x ${all.length} sessions, 1 run (estimated ${seconds(estimateMs)})`);
      const measured = await timed(1, () => perSessionLoop(ctx, all));
      assertSameMap(`per-session loop (${all.length}) vs windowed`, measured.last, windowedAll.last);
      loopAll = measured.timing;
    } else {
      progress(`${label} per-session loop x ${all.length} skipped: estimated ${seconds(estimateMs)} > --loop-budget-ms`);
      loopAll = { medianMs: estimateMs, minMs: estimateMs, maxMs: estimateMs, runs: 0, extrapolated: true };
    }

    const plan = await explain(ctx, sample, options.explainAnalyze);
    const actions = { clarification: 0, permission: 0 };
    for (const action of seeded.expected.values()) actions[action] += 1;
    progress(`${label} tail shapes: ${[...seeded.tails].map(([t, n]) => `${t}=${n}`).join(', ')}`);
    return {
      dialect,
      sessions: all.length,
      sample: sample.length,
      seedMs: seeded.seedMs,
      analyzeMs: seeded.analyzeMs,
      windowedSample: windowedSample.timing,
      windowedAll: windowedAll.timing,
      loopSample: loopSample.timing,
      loopAll,
      actions,
      plan,
    };
  } finally {
    progress(`${label} dropping ${bench.where}`);
    await bench.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// Reporting

const count = (n: number) => (n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n));
const ms = (t: Timing) => t.medianMs.toFixed(1);
const spread = (t: Timing) => (t.extrapolated ? 'extrapolated' : t.runs === 1 ? '1 run' : `median of ${t.runs}, ${t.minMs.toFixed(1)}..${t.maxMs.toFixed(1)}`);

function printReport(r: DialectReport): void {
  const loopRatio = r.loopSample.medianMs / r.windowedSample.medianMs;
  const scaling = r.windowedAll.medianMs / r.windowedSample.medianMs;
  const rows: Array<[string, string, string, string]> = [
    [`windowed@${count(r.sample)} (ms)`, ms(r.windowedSample), '', spread(r.windowedSample)],
    [`windowed@${count(r.sessions)} (ms)`, ms(r.windowedAll), '', spread(r.windowedAll)],
    [`loop@${count(r.sample)} (ms)`, ms(r.loopSample), '', spread(r.loopSample)],
    [
      `loop@${count(r.sessions)} (ms)`,
      r.loopAll.extrapolated ? `~${ms(r.loopAll)}` : ms(r.loopAll),
      '',
      r.loopAll.extrapolated ? `extrapolated: loop@${count(r.sample)} x ${r.sessions / r.sample}, not run (over --loop-budget-ms)` : spread(r.loopAll),
    ],
    [`loop / windowed @${count(r.sample)}`, `${loopRatio.toFixed(1)}x`, `>= ${TARGET_LOOP_OVER_WINDOW}x`, loopRatio >= TARGET_LOOP_OVER_WINDOW ? 'PASS' : 'FAIL'],
    [
      `windowed@${count(r.sessions)} / windowed@${count(r.sample)}`,
      `${scaling.toFixed(1)}x`,
      `<= ${TARGET_SCALING}x`,
      scaling <= TARGET_SCALING ? 'PASS' : 'FAIL',
    ],
    [`loop / windowed @${count(r.sessions)}`, `${(r.loopAll.medianMs / r.windowedAll.medianMs).toFixed(1)}x`, '', r.loopAll.extrapolated ? 'extrapolated' : ''],
  ];
  const out: string[] = [];
  out.push('');
  out.push(
    `== ${r.dialect}: ${r.sessions} sessions, ${r.sessions * TURNS_PER_SESSION} turns, ${r.sessions * MESSAGES_PER_SESSION} messages ` +
      `(seeded in ${seconds(r.seedMs)}, ANALYZE ${seconds(r.analyzeMs)}); ` +
      `${r.actions.clarification} clarification + ${r.actions.permission} permission sessions expected ==`,
  );
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((row) => row[i]!.length), ['metric', 'value', 'target'][i]!.length));
  const line = (cells: readonly string[]) => `  ${cells.map((c, i) => (i < 3 ? (i === 1 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)) : c)).join('  ')}`.trimEnd();
  out.push(line(['metric', 'value', 'target', 'result / notes']));
  for (const row of rows) out.push(line(row));
  out.push('');
  out.push(`  ${r.dialect === 'sqlite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN'} of the windowed statement for ${r.sample} sessions:`);
  // PostgreSQL inlines the bound id array into the plan text; a line of 1,000 UUIDs says nothing.
  for (const planLine of r.plan) out.push(`    ${planLine.length > 200 ? `${planLine.slice(0, 197)}...` : planLine}`);
  out.push(`  indexes used: ${indexesIn(r.plan).join(', ') || '(none)'}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // Knex quotes the whole failed statement before the driver's reason; a bulk INSERT is megabytes.
  const message = err.message.length > 1500 ? `${err.message.slice(0, 300)} [...] ${err.message.slice(-800)}` : err.message;
  const frames = (err.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line)).slice(0, 8);
  return [`${err.name}: ${message}`, ...frames].join('\n');
}

async function main(): Promise<void> {
  const started = performance.now();
  const options = parseOptions();
  const stop = (signal: string) => {
    progress(`${signal}: dropping benchmark databases`);
    void Promise.allSettled([...pendingDrops].map((drop) => drop())).then(() => process.exit(130));
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  for (const dialect of options.dialects) printReport(await benchDialect(dialect, options));
  process.stdout.write(`\nwall time ${seconds(performance.now() - started)} (${options.dialects.join(' + ')}, ${options.sessions} sessions)\n`);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:queries failed: ${describeError(err)}\n`);
  await Promise.allSettled([...pendingDrops].map((drop) => drop()));
  process.exitCode = 1;
});
