/**
 * `npm run bench:queries`: the windowed pending-action statement against the per-session loop it
 * replaces, on SQLite (a temp file) and PostgreSQL (a fresh schema). Every answer is checked against
 * an independent model of the seeded data.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { rawRows, type RepositoryContext } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { getPendingActionsBySessionIds } from '../src/repository/projection/pendingActions.js';
import type { PendingAction } from '../src/turns/pendingAction.js';
import { explainPendingActions, formatPlan } from './diagnostics/queryPlan.js';
import { WrongAnswerError, onCleanup, progress, runBench, secs, verdict, type DialectResult, type Row } from './harness.js';
import { openScratchDatabase } from './scratchDatabase.js';
import { BENCH_TIMESTAMP_FORMS, toKandevTimestamps, type BenchTimestampForms } from './seed/kandevTimestamps.js';
import { createRng } from './seed/random.js';
import { seedSessions } from './seed/seeder.js';
import { MESSAGES_PER_SESSION, TURNS_PER_SESSION } from './seed/sessionPlan.js';

const SAMPLE_SESSIONS = 1000;
const TARGET_LOOP_OVER_WINDOW = 5;
const TARGET_SCALING = 12;

interface Options {
  sessions: number;
  repeat: number;
  loopBudgetMs: number;
  diagnose: boolean;
  timestamps: BenchTimestampForms;
}

/** Median, extremes and run count of one timed call; `extrapolated` when estimated instead of run. */
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
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const medianMs = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { timing: { medianMs, minMs: sorted[0]!, maxMs: sorted.at(-1)!, runs }, last: last as T };
}

/** The N+1 shape the windowed statement replaces: one call per session, results merged. */
async function perSessionLoop(ctx: RepositoryContext, sessionIds: readonly string[]): Promise<Map<string, PendingAction>> {
  const merged = new Map<string, PendingAction>();
  for (const id of sessionIds) {
    for (const [sessionId, action] of await getPendingActionsBySessionIds(ctx, [id])) merged.set(sessionId, action);
  }
  return merged;
}

/** Compares the two maps over every session either holds; `only` restricts `expected` to those sessions first. */
function assertSameMap(what: string, actual: Map<string, PendingAction>, all: Map<string, PendingAction>, only?: readonly string[]): void {
  const expected = only ? new Map(only.filter((id) => all.has(id)).map((id) => [id, all.get(id)!])) : all;
  const diffs: string[] = [];
  for (const id of new Set([...actual.keys(), ...expected.keys()])) {
    if (actual.get(id) !== expected.get(id)) diffs.push(`${id}: got ${actual.get(id) ?? 'none'}, expected ${expected.get(id) ?? 'none'}`);
  }
  if (diffs.length > 0) throw new WrongAnswerError(`${what}: ${diffs.length} sessions differ, e.g.\n  ${diffs.slice(0, 8).join('\n  ')}`);
}

/** A seeded shuffle, so every run samples the same sessions. */
function sampleOf(ids: readonly string[], size: number): string[] {
  const rng = createRng(0x1000);
  const shuffled = [...ids];
  for (let i = shuffled.length - 1; i > 0; i -= 1) {
    const j = Math.floor(rng() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!];
  }
  return shuffled.slice(0, size);
}

/** Engine version and the settings that move these numbers. */
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

const count = (n: number) => (n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n));
const ms = (t: Timing) => (t.extrapolated ? `~${t.medianMs.toFixed(1)}` : t.medianMs.toFixed(1));
const spread = (t: Timing) => (t.extrapolated ? 'extrapolated' : t.runs === 1 ? '1 run' : `median of ${t.runs}, ${t.minMs.toFixed(1)}..${t.maxMs.toFixed(1)}`);

async function measure(dialect: DialectName, options: Options, services: { postgresUrl: string }): Promise<DialectResult> {
  const label = `[${dialect}]`;
  const scratch = await openScratchDatabase(dialect, { postgresUrl: services.postgresUrl, maxConnections: 2, schemaPrefix: 'bench_queries_' });
  const drop = onCleanup(() => scratch.drop());
  try {
    progress(`${label} database ${scratch.where}`);
    const seeded = await seedSessions(scratch.ctx, options.sessions, progress);
    if (options.timestamps !== 'canonical') progress(`${label} rewriting timestamps: ${options.timestamps}`);
    const ctx = await toKandevTimestamps(scratch.ctx, options.timestamps);
    const all = seeded.sessionIds;
    const sample = sampleOf(all, Math.min(SAMPLE_SESSIONS, all.length));
    const windowed = (ids: readonly string[]) => getPendingActionsBySessionIds(ctx, ids);

    const loadBefore = os.loadavg()[0]!;
    progress(`${label} warm-up`);
    assertSameMap('windowed (all sessions) vs independent model', await windowed(all), seeded.expected);
    await windowed(sample);
    await perSessionLoop(ctx, sample.slice(0, 100));

    progress(`${label} windowed x ${sample.length} sessions, ${options.repeat + 2} runs`);
    const windowedSample = await timed(options.repeat + 2, () => windowed(sample));
    assertSameMap(`windowed (${sample.length}) vs independent model`, windowedSample.last, seeded.expected, sample);
    progress(`${label} windowed x ${all.length} sessions, ${options.repeat} runs`);
    const windowedAll = await timed(options.repeat, () => windowed(all));
    assertSameMap(`windowed (${all.length}) vs independent model`, windowedAll.last, seeded.expected);

    const loopRuns = Math.max(1, Math.ceil(options.repeat / 2));
    progress(`${label} per-session loop x ${sample.length} sessions, ${loopRuns} runs`);
    const loopSample = await timed(loopRuns, () => perSessionLoop(ctx, sample));
    assertSameMap(`per-session loop (${sample.length}) vs windowed`, loopSample.last, windowedSample.last);

    let loopAll = loopSample.timing;
    const estimateMs = loopSample.timing.medianMs * (all.length / sample.length);
    if (all.length !== sample.length && estimateMs <= options.loopBudgetMs) {
      progress(`${label} per-session loop x ${all.length} sessions, 1 run (estimated ${secs(estimateMs)})`);
      const measured = await timed(1, () => perSessionLoop(ctx, all));
      assertSameMap(`per-session loop (${all.length}) vs windowed`, measured.last, windowedAll.last);
      loopAll = measured.timing;
    } else if (all.length !== sample.length) {
      progress(`${label} per-session loop x ${all.length} skipped: estimated ${secs(estimateMs)} > --loop-budget-ms`);
      loopAll = { medianMs: estimateMs, minMs: estimateMs, maxMs: estimateMs, runs: 0, extrapolated: true };
    }
    const loadAfter = os.loadavg()[0]!;
    const actions = { clarification: 0, permission: 0 };
    for (const action of seeded.expected.values()) actions[action] += 1;
    progress(`${label} tail shapes: ${[...seeded.tails].map(([t, n]) => `${t}=${n}`).join(', ')}`);

    const [wS, wA, lS, n, s] = [windowedSample.timing, windowedAll.timing, loopSample.timing, all.length, sample.length];
    const loopRatio = lS.medianMs / wS.medianMs;
    const scaling = wA.medianMs / wS.medianMs;
    const checks = [loopRatio >= TARGET_LOOP_OVER_WINDOW, scaling <= TARGET_SCALING];
    const rows: Row[] = [
      [`windowed@${count(s)}: one statement for ${s} sessions (ms)`, ms(wS), '', spread(wS)],
      [`windowed@${count(n)}: one statement for every session (ms)`, ms(wA), '', spread(wA)],
      [`loop@${count(s)}: one call per session (ms)`, ms(lS), '', spread(lS)],
      [
        `loop@${count(n)} (ms)`,
        ms(loopAll),
        '',
        loopAll.extrapolated ? `extrapolated: loop@${count(s)} x ${n / s}, not run (over --loop-budget-ms)` : spread(loopAll),
      ],
      [`loop / windowed @${count(s)}`, `${loopRatio.toFixed(1)}x`, `>= ${TARGET_LOOP_OVER_WINDOW}x`, verdict(checks[0]!)],
      [`windowed@${count(n)} / windowed@${count(s)}`, `${scaling.toFixed(1)}x`, `<= ${TARGET_SCALING}x`, verdict(checks[1]!)],
      [`context: loop / windowed @${count(n)}`, `${(loopAll.medianMs / wA.medianMs).toFixed(1)}x`, '', loopAll.extrapolated ? 'extrapolated' : ''],
    ];
    const plan = options.diagnose ? formatPlan(dialect, s, await explainPendingActions(ctx, sample)) : [];
    return {
      dialect,
      heading:
        `${n} sessions, ${n * TURNS_PER_SESSION} turns, ${n * MESSAGES_PER_SESSION} messages (seeded in ${secs(seeded.seedMs)}, ANALYZE ${secs(seeded.analyzeMs)}); ` +
        `${actions.clarification} clarification + ${actions.permission} permission sessions expected`,
      intro: [`   ${await serverInfo(ctx)}; load average ${loadBefore.toFixed(2)} -> ${loadAfter.toFixed(2)} while measuring`],
      rows,
      after: plan,
      summary: [
        [`windowed statement, ${count(SAMPLE_SESSIONS)} sessions`, `${ms(wS)} ms`, ''],
        [`windowed statement, ${count(n)} sessions`, `${ms(wA)} ms`, ''],
        [`per-session loop, ${count(SAMPLE_SESSIONS)} sessions`, `${ms(lS)} ms`, ''],
        [`loop ÷ windowed at ${count(SAMPLE_SESSIONS)}`, `${loopRatio.toFixed(1)}× ${verdict(checks[0]!)}`, `≥ ${TARGET_LOOP_OVER_WINDOW}×`],
        [`windowed ${count(n)} ÷ ${count(SAMPLE_SESSIONS)}`, `${scaling.toFixed(1)}× ${verdict(checks[1]!)}`, `≤ ${TARGET_SCALING}×`],
      ],
      checks,
    };
  } finally {
    await drop();
  }
}

runBench<Options>({
  script: 'bench:queries',
  title: 'the windowed pending-action statement against the per-session loop, per dialect',
  options: {
    sessions: { arg: '<n>', default: '10000', help: 'sessions to seed' },
    repeat: { arg: '<n>', default: '5', help: 'timed runs, see above' },
    'loop-budget-ms': { arg: '<ms>', default: '60000', help: 'longest loop@all to run instead of extrapolating' },
    timestamps: {
      arg: '<forms>',
      default: 'canonical',
      help: `canonical, kandev: SQLite rows rewritten in Kandev's text form and read through the normalised key,
or kandev-indexed: the same plus the key-expression index docs/schema.md reports for Kandev-owned
SQLite schemas (PostgreSQL: no effect)`,
    },
    diagnose: { help: "also print the windowed statement's plan (PostgreSQL: EXPLAIN ANALYZE, BUFFERS)" },
  },
  parse(read) {
    const timestamps = read.string('timestamps') as BenchTimestampForms;
    if (!BENCH_TIMESTAMP_FORMS.includes(timestamps)) read.problem(`--timestamps must be ${BENCH_TIMESTAMP_FORMS.join(', ')} (got ${timestamps})`);
    return {
      sessions: read.int('sessions', 2),
      repeat: read.int('repeat', 1),
      loopBudgetMs: read.int('loop-budget-ms', 0),
      diagnose: read.flag('diagnose'),
      timestamps,
    };
  },
  measure,
});
