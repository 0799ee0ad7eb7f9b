/**
 * `npm run bench:queries`: the windowed pending-action statement against the per-session loop it
 * replaces, on SQLite (a temp file) and PostgreSQL (a fresh schema), every ratio taken between
 * figures of the same run. USAGE below says what each figure is.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { rawRows, type RepositoryContext } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { getPendingActionsBySessionIds } from '../src/repository/projection/pendingActions.js';
import type { PendingAction } from '../src/turns/pendingAction.js';
import { WrongAnswerError, onCleanup, parseCommandLine, progress, runBench, secs as seconds } from './benchRun.js';
import { optionChecks } from './optionChecks.js';
import { explainPendingActions, formatPlan } from './diagnostics/queryPlan.js';
import { collectRunInfo, formatRunInfo } from './runInfo.js';
import { openScratchDatabase } from './scratchDatabase.js';
import { createRng } from './seed/random.js';
import { MESSAGES_PER_SESSION, TURNS_PER_SESSION } from './seed/sessionPlan.js';
import { seedSessions } from './seed/seeder.js';
import { BENCH_TIMESTAMP_FORMS, toKandevTimestamps, type BenchTimestampForms } from './seed/kandevTimestamps.js';
import { DIALECT_TITLE, markdownTable, textTable, verdict, type Row } from './table.js';

const USAGE = `
npm run bench:queries -- [--dialect sqlite|postgres|both] [--sessions <n>] [--repeat <n>] [--loop-budget-ms <ms>] [--timestamps <forms>] [--diagnose]

Seeds --sessions sessions (20 turns and 50 messages each, Kandev's shapes) and measures, per dialect:
  windowed@1k   getPendingActionsBySessionIds for 1,000 sessions in one statement (median of --repeat + 2 runs)
  windowed@all  the same for every session (median of --repeat runs)
  loop@1k       the per-session loop it replaces, one call per session (median of ceil(--repeat / 2) runs)
  loop@all      the loop over every session, once, if its estimate fits --loop-budget-ms; else extrapolated
Targets: loop@1k / windowed@1k >= 5x; windowed@all / windowed@1k <= 12x.
Every answer is checked against an independent model of the seeded data.

Options:
  --dialect         sqlite, postgres or both (default both)
  --sessions        sessions to seed (default 10000)
  --repeat          timed runs, see above (default 5)
  --loop-budget-ms  longest loop@all to run instead of extrapolating (default 60000)
  --timestamps      canonical (default), kandev: SQLite rows rewritten in Kandev's text form and read
                    through the normalised key, or kandev-indexed: the same plus the key-expression
                    index docs/schema.md reports for Kandev-owned SQLite schemas (PostgreSQL: no effect)
  --diagnose        also print the windowed statement's plan (PostgreSQL: EXPLAIN ANALYZE, BUFFERS)
  --help            this text

PostgreSQL: BENCH_POSTGRES_URL, else POSTGRES_URL, else postgres://postgres@127.0.0.1:5432/test;
server settings ride on the URL (...?options=-c%20jit%3Doff). Progress goes to stderr, results to stdout.
Exit code: 0 when the run completed, whatever its verdicts (PASS and FAIL are printed results);
2 for bad arguments; 1 when it could not run (a service not reachable, an error, or a wrong answer:
loop, window and model disagree).
`;

const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const SAMPLE_SESSIONS = 1000;
const TARGET_LOOP_OVER_WINDOW = 5;
const TARGET_SCALING = 12;

interface Options {
  dialects: DialectName[];
  sessions: number;
  repeat: number;
  loopBudgetMs: number;
  diagnose: boolean;
  timestamps: BenchTimestampForms;
  postgresUrl: string;
}

function parseOptions(): Options {
  const { values } = parseCommandLine(
    () =>
      parseArgs({
        strict: true,
        allowPositionals: false,
        options: {
          dialect: { type: 'string', default: 'both' },
          sessions: { type: 'string', default: '10000' },
          repeat: { type: 'string', default: '5' },
          'loop-budget-ms': { type: 'string', default: '60000' },
          diagnose: { type: 'boolean', default: false },
          timestamps: { type: 'string', default: 'canonical' },
        },
      }),
    USAGE,
  );
  const check = optionChecks();
  const dialects = check.dialects(values.dialect);
  const int = check.int;
  const sessions = int('sessions', values.sessions, 2);
  const repeat = int('repeat', values.repeat, 1);
  const loopBudgetMs = int('loop-budget-ms', values['loop-budget-ms'], 0);
  const timestamps = values.timestamps as BenchTimestampForms;
  if (!BENCH_TIMESTAMP_FORMS.includes(timestamps)) check.problem(`--timestamps must be ${BENCH_TIMESTAMP_FORMS.join(', ')} (got ${values.timestamps})`);
  check.done();
  return {
    dialects,
    sessions,
    repeat,
    loopBudgetMs,
    diagnose: values.diagnose,
    timestamps,
    postgresUrl: process.env.BENCH_POSTGRES_URL ?? process.env.POSTGRES_URL ?? DEFAULT_POSTGRES_URL,
  };
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
  /** --diagnose: the windowed statement's plan. */
  plan?: string[];
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
  const scratch = await openScratchDatabase(dialect, { postgresUrl: options.postgresUrl, maxConnections: 2, schemaPrefix: 'bench_queries_' });
  const drop = onCleanup(() => scratch.drop());
  try {
    progress(`${label} database ${scratch.where}`);
    const seeded = await seedSessions(scratch.ctx, options.sessions, progress);
    if (options.timestamps !== 'canonical') progress(`${label} rewriting timestamps: ${options.timestamps}`);
    const ctx = await toKandevTimestamps(scratch.ctx, options.timestamps);
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
      plan: options.diagnose ? await explainPendingActions(ctx, sample) : undefined,
      server: await serverInfo(ctx),
      load,
    };
  } finally {
    await drop();
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

function formatReport(r: DialectReport): string[] {
  const { loopRatio, loopRatioPass, scaling, scalingPass } = verdicts(r);
  const rows: Row[] = [
    [`windowed@${count(r.sample)}: one statement for ${r.sample} sessions (ms)`, ms(r.windowedSample), '', spread(r.windowedSample)],
    [`windowed@${count(r.sessions)}: one statement for every session (ms)`, ms(r.windowedAll), '', spread(r.windowedAll)],
    [`loop@${count(r.sample)}: one call per session (ms)`, ms(r.loopSample), '', spread(r.loopSample)],
    [
      `loop@${count(r.sessions)} (ms)`,
      r.loopAll.extrapolated ? `~${ms(r.loopAll)}` : ms(r.loopAll),
      '',
      r.loopAll.extrapolated ? `extrapolated: loop@${count(r.sample)} x ${r.sessions / r.sample}, not run (over --loop-budget-ms)` : spread(r.loopAll),
    ],
    [`loop / windowed @${count(r.sample)}`, `${loopRatio.toFixed(1)}x`, `>= ${TARGET_LOOP_OVER_WINDOW}x`, verdict(loopRatioPass)],
    [`windowed@${count(r.sessions)} / windowed@${count(r.sample)}`, `${scaling.toFixed(1)}x`, `<= ${TARGET_SCALING}x`, verdict(scalingPass)],
    [`context: loop / windowed @${count(r.sessions)}`, `${(r.loopAll.medianMs / r.windowedAll.medianMs).toFixed(1)}x`, '', r.loopAll.extrapolated ? 'extrapolated' : ''],
  ];
  return [
    '',
    `== ${DIALECT_TITLE[r.dialect]}: ${r.sessions} sessions, ${r.sessions * TURNS_PER_SESSION} turns, ${r.sessions * MESSAGES_PER_SESSION} messages ` +
      `(seeded in ${seconds(r.seedMs)}, ANALYZE ${seconds(r.analyzeMs)}); ${r.actions.clarification} clarification + ${r.actions.permission} permission sessions expected ==`,
    `   ${r.server}; load average ${r.load[0].toFixed(2)} -> ${r.load[1].toFixed(2)} while measuring`,
    ...textTable(rows),
    ...(r.plan ? formatPlan(r.dialect, r.sample, r.plan) : []),
  ];
}

function formatSummary(reports: readonly DialectReport[]): string[] {
  const cells = (fn: (r: DialectReport) => string) => reports.map(fn);
  const lines = [
    [`windowed statement, ${count(SAMPLE_SESSIONS)} sessions`, ...cells((r) => `${ms(r.windowedSample)} ms`), ''],
    [`windowed statement, ${count(reports[0]?.sessions ?? 0)} sessions`, ...cells((r) => `${ms(r.windowedAll)} ms`), ''],
    [`per-session loop, ${count(SAMPLE_SESSIONS)} sessions`, ...cells((r) => `${ms(r.loopSample)} ms`), ''],
    [`loop ÷ windowed at ${count(SAMPLE_SESSIONS)}`, ...cells((r) => `${verdicts(r).loopRatio.toFixed(1)}× ${verdict(verdicts(r).loopRatioPass)}`), `≥ ${TARGET_LOOP_OVER_WINDOW}×`],
    [`windowed ${count(reports[0]?.sessions ?? 0)} ÷ ${count(SAMPLE_SESSIONS)}`, ...cells((r) => `${verdicts(r).scaling.toFixed(1)}× ${verdict(verdicts(r).scalingPass)}`), `≤ ${TARGET_SCALING}×`],
  ];
  const met = reports.map((r) => `${DIALECT_TITLE[r.dialect]} ${[verdicts(r).loopRatioPass, verdicts(r).scalingPass].filter(Boolean).length} of 2`);
  return ['summary:', ...markdownTable(['npm run bench:queries', ...reports.map((r) => DIALECT_TITLE[r.dialect]), 'target'], lines), `targets met: ${met.join(', ')}`];
}

async function main(): Promise<void> {
  const started = performance.now();
  const options = parseOptions();
  const out = (lines: readonly string[]) => process.stdout.write(`${lines.join('\n')}\n`);
  out([
    'npm run bench:queries: the windowed pending-action statement against the per-session loop, per dialect',
    ...formatRunInfo(await collectRunInfo({ postgresUrl: options.postgresUrl, natsUrl: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' })),
    `options:  --dialect ${options.dialects.join('+')} --sessions ${options.sessions} --repeat ${options.repeat} --loop-budget-ms ${options.loopBudgetMs} --timestamps ${options.timestamps}${options.diagnose ? ' --diagnose' : ''}`,
  ]);
  const reports: DialectReport[] = [];
  for (const dialect of options.dialects) {
    const report = await benchDialect(dialect, options);
    out(formatReport(report));
    reports.push(report);
  }
  out(['', ...formatSummary(reports), `wall time ${seconds(performance.now() - started)}`]);
}

runBench('npm run bench:queries', main);
