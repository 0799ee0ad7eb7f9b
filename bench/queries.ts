/**
 * Query benchmark: the windowed pending-action statement against the per-session loop it replaces,
 * on SQLite (temp file) and PostgreSQL (a fresh schema), measured in one run and printed as ratios.
 *
 *   npm run bench:queries -- [--dialect sqlite|postgres|both] [--sessions 10000] [--repeat 5]
 *                            [--loop-budget-ms 60000] [--explain-analyze]
 *
 * PostgreSQL URL: BENCH_POSTGRES_URL, else POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/test.
 * Server settings ride on the URL: `...?options=-c%20jit%3Doff` measures without JIT (each table's
 * header line prints the settings in force).
 *
 * After ANALYZE and a warm-up, timings are medians of --repeat + 2 runs (windowed, 1,000 sessions),
 * --repeat runs (windowed, all sessions) and ceil(--repeat / 2) runs (per-session loop, 1,000); the
 * loop over all sessions runs once if its estimate fits --loop-budget-ms, else it is extrapolated.
 * Progress goes to stderr, results to stdout. A missed target prints FAIL and still exits 0; a wrong
 * answer (loop, window and the independent model in seedPlan.ts disagree) or any error exits 1.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { rawRows, type RepositoryContext } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { getPendingActionsBySessionIds, pendingActionsStatement } from '../src/repository/pendingActions.js';
import type { PendingAction } from '../src/turns/pendingAction.js';
import { dropAllBenchDatabases, openBenchDatabase, seedBenchDatabase } from './benchDatabase.js';
import { createRng } from './seedMessages.js';
import { MESSAGES_PER_SESSION, TURNS_PER_SESSION } from './seedPlan.js';

const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const SAMPLE_SESSIONS = 1000;
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

class UsageError extends Error {
  override name = 'UsageError';
  readonly code = 'BENCH_USAGE';
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
  if (problems.length > 0) throw new UsageError(`bad arguments:\n  ${problems.join('\n  ')}`);
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
  /** Engine version and the settings that move these numbers. */
  server: string;
  /** 1-minute load average before and after measuring: the machine is shared. */
  load: [number, number];
}

async function serverInfo(ctx: RepositoryContext): Promise<string> {
  if (ctx.dialect.name === 'sqlite') {
    const [row] = await rawRows<{ v: string; cache: number }>(ctx, 'SELECT sqlite_version() AS v, (SELECT cache_size FROM pragma_cache_size) AS cache');
    return `SQLite ${row?.v}, cache_size ${row?.cache}`;
  }
  const [row] = await rawRows<{ v: string; jit: string; work_mem: string; shared_buffers: string }>(
    ctx,
    `SELECT current_setting('server_version') AS v, current_setting('jit') AS jit,
            current_setting('work_mem') AS work_mem, current_setting('shared_buffers') AS shared_buffers`,
  );
  return `PostgreSQL ${row?.v}, jit=${row?.jit}, work_mem=${row?.work_mem}, shared_buffers=${row?.shared_buffers}`;
}

async function benchDialect(dialect: DialectName, options: Options): Promise<DialectReport> {
  const label = `[${dialect}]`;
  const bench = await openBenchDatabase(dialect, options.postgresUrl);
  try {
    const seeded = await seedBenchDatabase(bench, options.sessions, progress);
    const { ctx } = bench;
    const all = seeded.sessionIds;
    const sample = sampleOf(all, Math.min(SAMPLE_SESSIONS, all.length));

    const loadBefore = os.loadavg()[0]!;
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

    const load: [number, number] = [loadBefore, os.loadavg()[0]!];
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
      server: await serverInfo(ctx),
      load,
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

interface Verdicts {
  loopRatio: number;
  loopRatioPass: boolean;
  scaling: number;
  scalingPass: boolean;
}

function verdicts(r: DialectReport): Verdicts {
  const loopRatio = r.loopSample.medianMs / r.windowedSample.medianMs;
  const scaling = r.windowedAll.medianMs / r.windowedSample.medianMs;
  return { loopRatio, loopRatioPass: loopRatio >= TARGET_LOOP_OVER_WINDOW, scaling, scalingPass: scaling <= TARGET_SCALING };
}

function printReport(r: DialectReport): void {
  const { loopRatio, loopRatioPass, scaling, scalingPass } = verdicts(r);
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
    [`loop / windowed @${count(r.sample)}`, `${loopRatio.toFixed(1)}x`, `>= ${TARGET_LOOP_OVER_WINDOW}x`, loopRatioPass ? 'PASS' : 'FAIL'],
    [
      `windowed@${count(r.sessions)} / windowed@${count(r.sample)}`,
      `${scaling.toFixed(1)}x`,
      `<= ${TARGET_SCALING}x`,
      scalingPass ? 'PASS' : 'FAIL',
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
  out.push(`  ${r.server}; load average ${r.load[0].toFixed(2)} -> ${r.load[1].toFixed(2)} on ${os.cpus().length} CPUs`);
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
  if (err instanceof UsageError || (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return err.message;
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
    void dropAllBenchDatabases().then(() => process.exit(130));
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  const reports: DialectReport[] = [];
  for (const dialect of options.dialects) {
    const report = await benchDialect(dialect, options);
    printReport(report);
    reports.push(report);
  }
  const summary = ['', 'summary (targets: loop/windowed >= 5x, windowed@all / windowed@1k <= 12x):'];
  for (const r of reports) {
    const v = verdicts(r);
    summary.push(
      `  ${r.dialect.padEnd(8)} loop/windowed ${v.loopRatio.toFixed(1)}x ${v.loopRatioPass ? 'PASS' : 'FAIL'}, ` +
        `scaling ${v.scaling.toFixed(1)}x ${v.scalingPass ? 'PASS' : 'FAIL'}`,
    );
  }
  const failed = reports.some((r) => !verdicts(r).loopRatioPass || !verdicts(r).scalingPass);
  summary.push(failed ? '  FAIL: at least one target missed (see the tables above)' : '  all targets PASS');
  summary.push(`wall time ${seconds(performance.now() - started)} (${options.dialects.join(' + ')}, ${options.sessions} sessions)`);
  process.stdout.write(`${summary.join('\n')}\n`);
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench:queries failed: ${describeError(err)}\n`);
  await dropAllBenchDatabases();
  process.exitCode = 1;
});
