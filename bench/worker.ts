/**
 * `npm run bench`: the worker against the bare work one projection does, on SQLite (a temp file)
 * and PostgreSQL (a fresh schema), over the real NATS JetStream under a unique subject prefix,
 * every ratio taken between figures of the same run.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connectNats } from '../src/bin/connectNats.js';
import { startWorker } from '../src/bin/worker.js';
import { NatsSummaryPublisher } from '../src/events/natsSummaryPublisher.js';
import { ensureOutputTopology } from '../src/events/natsTopology.js';
import { topologyFor } from '../src/contract/subjects.js';
import { silentLogger } from '../src/logger.js';
import type { DialectName } from '../src/repository/dialect.js';
import { systemClock } from '../src/timestamps.js';
import { benchTopology, benchWorkerConfig, SummaryWatcher } from './bus.js';
import { formatLevelDiagnosis, startLevelTrace } from './diagnostics/levelTrace.js';
import { DIALECT_TITLE, onCleanup, progress, runBench, secs, type BenchServices, type DialectResult } from './harness.js';
import { renderLatencyChart } from './latencyChart.js';
import { latencyLevels, levelEventCount, measureLatencyLevels } from './latencyLevels.js';
import { openScratchDatabase } from './scratchDatabase.js';
import { seedTasks, settleAfterBulkWrites, toggleTasks } from './seed/seeder.js';
import { measureBoot } from './workerBoot.js';
import {
  addRates,
  measureBareRoundTrips,
  measureBursts,
  measureDistinct,
  measureLimit,
  measureMemory,
  perSecond,
  storeWithoutWriteRecord,
  type BenchEnv,
  type Rate,
} from './workerPhases.js';
import { WorkerProcess } from './workerProcess.js';
import { openFloor } from './workerFloor.js';
import { addCosts, CostMeter, type PhaseCost } from './costMeter.js';
import { latencyThresholdMs, workerReport, type DialectReport } from './workerReport.js';

const CONCURRENCY = 16;
const PAGE_SIZE = 500;
// The worker CLI's default pool (DB_MAX_CONNECTIONS); SQLite always has its one writer.
const PG_POOL = 10;
const FULL_LATENCY_SECONDS = 30;
const CHART_FILE = fileURLToPath(new URL('../docs/latency-vs-load.svg', import.meta.url));

/** Counts at --scale 1, and the floor each scaled count keeps. */
const COUNTS = {
  reconcileTasks: [100_000, 2000],
  warmTasks: [200, 50],
  limitTasks: [4000, 128],
  distinctTasks: [4000, 128],
  burstTasks: [200, 16],
  burstLength: [100, 10],
  bareRoundTrips: [1000, 100],
  // Toggle tasks set aside for (4); its levels reuse every toggle task and seed more when they need them.
  latencyTasks: [10_000, 200],
  publishCeiling: [20_000, 2000],
  memoryWarmup: [200_000, 5000],
  memoryEvents: [1_000_000, 20_000],
  memoryMidpoint: [200_000, 5000],
  memoryHotTasks: [1000, 50],
} as const satisfies Record<string, readonly [number, number]>;
type Counts = { [K in keyof typeof COUNTS]: number };

interface Options {
  scale: number;
  latencySeconds: number;
  chartFile: string;
  diagnose: boolean;
  counts: Counts;
}

const workerConfig = (prefix: string, bootReconcile: boolean) =>
  benchWorkerConfig(prefix, { projectionBatchSize: CONCURRENCY, reconcilePageSize: PAGE_SIZE, bootReconcile });

/** Consecutive ranges of the toggle tasks, one per phase; the rest of the seeded tasks are mixed. */
function slices(counts: Counts) {
  let at = 0;
  const take = (n: number) => [at, (at += n)] as const;
  return {
    warm: take(counts.warmTasks),
    limit: take(counts.limitTasks),
    distinct: take(counts.distinctTasks),
    floor: take(counts.distinctTasks),
    bursts: take(counts.burstTasks),
    bare: take(counts.bareRoundTrips),
    latency: take(counts.latencyTasks),
    total: at,
  };
}

async function benchDialect(dialect: DialectName, options: Options, services: BenchServices): Promise<DialectReport> {
  const label = `[${dialect}]`;
  const dialectStarted = performance.now();
  const { counts } = options;
  const plan = slices(counts);
  const reconcileTasks = Math.max(counts.reconcileTasks, plan.total);
  // Named, so the cost meter finds this run's PostgreSQL backends.
  const applicationName = `bench_worker_${randomUUID().slice(0, 8)}`;
  const postgresUrl = `${services.postgresUrl}${services.postgresUrl.includes('?') ? '&' : '?'}application_name=${applicationName}`;
  const scratch = await openScratchDatabase(dialect, { postgresUrl, maxConnections: PG_POOL, schemaPrefix: 'bench_worker_' });
  onCleanup(() => scratch.drop());
  const { db, ctx, where, url, searchPath } = scratch;
  // The worker CLI's connection options; the worker and the clients each on a connection of their own.
  const openNats = async (name: string) => {
    const nc = await connectNats({ natsUrl: services.natsUrl }, `bench-${name}-${dialect}`);
    onCleanup(() => nc.drain());
    return nc;
  };
  const ncWorker = await openNats('worker');
  const ncClient = await openNats('client');
  const { prefix, topology } = benchTopology(ncClient, 'bench', dialect);
  const jsm = await jetstreamManager(ncClient);
  const logger = silentLogger();
  progress(`${label} database ${where}; NATS ${services.natsUrl} prefix ${prefix}`);

  progress(`${label} seeding ${reconcileTasks} tasks (${plan.total} of them toggleable)`);
  let nextReport = 0.2;
  const seeded = await seedTasks(ctx, {
    tasks: reconcileTasks,
    toggleBelow: plan.total,
    onProgress: (done) => {
      if (done / reconcileTasks < nextReport - 1e-9) return;
      progress(`${label}   ${done}/${reconcileTasks} tasks`);
      while (nextReport <= done / reconcileTasks + 1e-9) nextReport += 0.2;
    },
  });
  progress(`${label} seeded in ${secs(seeded.seedMs)}: ${JSON.stringify(seeded.rows)}; ${seeded.expectedDrift} tasks need repair`);
  const ids = seeded.taskIds;
  const slice = ([from, to]: readonly [number, number]) => ids.slice(from, to);
  const watcher = new SummaryWatcher(ncClient, topology);
  onCleanup(async () => watcher.stop());
  const startInProcess = async (bootReconcile: boolean) => {
    const worker = await startWorker({ db, nc: ncWorker, config: workerConfig(prefix, bootReconcile), logger });
    return { worker, stop: onCleanup(() => worker.stop()) };
  };

  // (5) first: it needs the tasks as seeded.
  const boot = await measureBoot(
    {
      ctx,
      ncWorker,
      ncClient,
      jsm,
      topology,
      watcher,
      label,
      pageSize: PAGE_SIZE,
      publishCeiling: counts.publishCeiling,
      startWorker: () => startInProcess(true),
    },
    {
      ids,
      toggleTasks: plan.total,
      expectedColdDrift: seeded.expectedDrift,
    },
  );

  // The worker under test, and a publisher like the one it uses, for the bare figures.
  const { worker, stop } = await startInProcess(false);
  const { summaries } = await ensureOutputTopology(ncWorker, topology);
  const publisher = new NatsSummaryPublisher(ncWorker, topology, summaries, systemClock);
  const env: BenchEnv = { ctx, nc: ncClient, jsm, topology, watcher, sessionOf: seeded.sessionOf, logger, worker };
  const toggle = (taskIds: readonly string[]) => toggleTasks(ctx, taskIds, systemClock());
  const floor = await openFloor(env, await openNats('floor'), workerConfig(prefix, false), db.maxConnections);
  const meter = new CostMeter(ctx, jsm, services.natsUrl, searchPath ? { applicationName, schema: searchPath, pool: PG_POOL } : undefined);

  progress(`${label} warm-up: ${counts.warmTasks} projections bare and through the worker`);
  const warm = slice(plan.warm);
  await toggle(warm);
  await measureLimit(env, publisher, warm, CONCURRENCY);
  await toggle(warm);
  await measureDistinct(env, warm);
  await toggle(warm);
  await measureDistinct(floor.env, warm, floor.settled);

  // (1), (2) and the floor of (2), alternating halves so a neighbour's load spike hits all alike; (1)
  // without the record of summary writes beside each round of (1), on the same tasks, first after it
  // then before; the floor on tasks of its own, after (2) then before, each round's costs measured.
  const limitIds = slice(plan.limit);
  const distinctIds = slice(plan.distinct);
  const floorIds = slice(plan.floor);
  const limitRounds: Rate[] = [];
  const unrecordedRounds: Rate[] = [];
  const distinctRounds: Array<{ result: Rate; cost: PhaseCost }> = [];
  const floorRounds: Array<{ result: Rate; cost: PhaseCost }> = [];
  const unrecorded = storeWithoutWriteRecord(ctx);
  for (const half of [0, 1]) {
    const part = <T>(list: readonly T[]) => (half === 0 ? list.slice(0, list.length >> 1) : list.slice(list.length >> 1));
    const limitRound = async () => {
      await toggle(part(limitIds));
      progress(`${label} (1) round ${half + 1}: projectTask x ${part(limitIds).length} distinct tasks, ${CONCURRENCY} concurrent`);
      limitRounds.push(await measureLimit(env, publisher, part(limitIds), CONCURRENCY));
    };
    const unrecordedRound = async () => {
      await toggle(part(limitIds));
      progress(`${label} (1) round ${half + 1} without the record of summary writes`);
      unrecordedRounds.push(await measureLimit(env, publisher, part(limitIds), CONCURRENCY, unrecorded));
    };
    for (const round of half === 0 ? [limitRound, unrecordedRound] : [unrecordedRound, limitRound]) await round();
    const distinctRound = async () => {
      await toggle(part(distinctIds));
      progress(`${label} (2) round ${half + 1}: ${part(distinctIds).length} events for distinct changed tasks`);
      // The prompt dispatcher passes the events woke run after their acks: in (2)'s costs, not the floor's.
      const round = await meter.measure(topology, part(distinctIds).length, async () => {
        const rate = await measureDistinct(env, part(distinctIds));
        await worker.promptsIdle();
        return rate;
      });
      distinctRounds.push(round);
    };
    const floorRound = async () => {
      await toggle(part(floorIds));
      progress(`${label} (2) floor round ${half + 1}: the same work on ${part(floorIds).length} tasks, drivers and bus only`);
      floorRounds.push(await meter.measure(floor.env.topology, part(floorIds).length, () => measureDistinct(floor.env, part(floorIds), floor.settled)));
    };
    for (const round of half === 0 ? [distinctRound, floorRound] : [floorRound, distinctRound]) await round();
  }
  const limit = limitRounds.reduce(addRates);
  const distinct = distinctRounds.map((r) => r.result).reduce(addRates);
  const bucket = await meter.bucketBytesPerKey(topology);

  // (3)
  const burstIds = slice(plan.bursts);
  await toggle(burstIds);
  progress(`${label} (3) bursts: ${counts.burstLength} events x ${burstIds.length} tasks`);
  const bursts = await measureBursts(env, worker, burstIds, counts.burstLength);

  // (4) Every toggle task but the warm-up's serves the levels, the largest of which may need more:
  // those are seeded now, after (1)-(3) ran on the tables as (5) left them, and get their first
  // summary through the worker, so the bucket the worker process finds is complete (a short one
  // would start a refill under the levels).
  const levels = latencyLevels(perSecond(limit), perSecond(distinct));
  const pool = ids.slice(plan.warm[1], plan.total);
  const extra = Math.max(0, ...levels.map((l) => levelEventCount(l, options.latencySeconds))) - pool.length;
  if (extra > 0) {
    progress(`${label} (4) seeding ${extra} more toggle tasks for the latency levels`);
    const more = await seedTasks(ctx, { tasks: extra, from: reconcileTasks, toggleBelow: reconcileTasks + extra });
    for (const [taskId, sessionId] of more.sessionOf) env.sessionOf.set(taskId, sessionId);
    await measureDistinct(env, more.taskIds);
    pool.push(...more.taskIds);
  }
  // Each timed run starts after its setup's bulk toggle has settled: the UPDATE of thousands of
  // sessions at once leaves a WAL flush, dirty pages and unset hint bits (SQLite: a WAL past its
  // checkpoint threshold) that would otherwise land on the first samples; events in production
  // follow their own small writes.
  const bareIds = slice(plan.bare);
  await toggle(bareIds);
  await settleAfterBulkWrites(ctx);
  progress(`${label} (4) bare round trips: ${bareIds.length}, one at a time`);
  const bare = await measureBareRoundTrips(env, publisher, bareIds);
  await stop();
  progress(`${label} (4) latency levels, ${options.latencySeconds} s each, against a worker process`);
  const paced = await WorkerProcess.start({
    databaseUrl: url,
    searchPath,
    maxConnections: PG_POOL,
    natsUrl: services.natsUrl,
    config: workerConfig(prefix, false),
    diagnose: options.diagnose,
  });
  const stopPaced = onCleanup(() => paced.stop());
  const latency = await measureLatencyLevels(
    {
      env,
      pool,
      warm,
      toggle,
      settle: () => settleAfterBulkWrites(ctx),
      progress: (line) => progress(`${label} ${line.trimStart()}`),
      trace: options.diagnose ? (count) => startLevelTrace(count, paced) : undefined,
    },
    levels,
    options.latencySeconds,
  );
  await stopPaced();

  // (6) In a worker process of its own, so the RSS is the worker's alone (not this process's
  // publisher, nor what seeding and the phases above left in the allocator).
  const hot = ids.slice(0, counts.memoryHotTasks);
  progress(`${label} (6) memory: a worker process; ${counts.memoryWarmup} warm-up events, then ${counts.memoryEvents}`);
  const child = await WorkerProcess.start({
    databaseUrl: url,
    searchPath,
    maxConnections: PG_POOL,
    natsUrl: services.natsUrl,
    config: workerConfig(prefix, false),
  });
  const stopChild = onCleanup(() => child.stop());
  const memoryStarted = performance.now();
  const { result: memory, cost: streamingCost } = await meter.measure(
    topology,
    counts.memoryWarmup + counts.memoryEvents,
    () =>
      measureMemory(env, child, hot, { warmup: counts.memoryWarmup, events: counts.memoryEvents, midEvents: counts.memoryMidpoint }, (done, peak) => {
        if (done % 100_000 === 0 || done === counts.memoryEvents) {
          const rate = Math.round((done * 1000) / (performance.now() - memoryStarted));
          progress(`${label}   ${done}/${counts.memoryEvents} events (~${rate}/s), worker rss peak so far ${Math.round(peak / 1048576)} MB`);
        }
      }),
    child.pid,
  );
  await stopChild();

  return {
    dialect,
    where,
    seed: { tasks: reconcileTasks, drift: seeded.expectedDrift, ms: seeded.seedMs },
    concurrency: CONCURRENCY,
    pageSize: PAGE_SIZE,
    limit,
    limitRounds: limitRounds.map(perSecond),
    unrecorded: unrecordedRounds.reduce(addRates),
    unrecordedRounds: unrecordedRounds.map(perSecond),
    distinct,
    distinctRounds: distinctRounds.map((r) => perSecond(r.result)),
    floor: floorRounds.map((r) => r.result).reduce(addRates),
    floorRounds: floorRounds.map((r) => perSecond(r.result)),
    costs: {
      distinct: distinctRounds.map((r) => r.cost).reduce(addCosts),
      floor: floorRounds.map((r) => r.cost).reduce(addCosts),
      streaming: streamingCost,
      bucket,
    },
    bursts: { ...bursts, tasks: burstIds.length, length: counts.burstLength },
    bare,
    latency,
    latencySeconds: options.latencySeconds,
    boot,
    memory,
    ms: performance.now() - dialectStarted,
  };
}

/** Every dialect's report, for the chart drawn at the end. */
const reports: DialectReport[] = [];

runBench<Options>({
  script: 'bench',
  title: 'the worker against the bare work of a projection, per dialect',
  options: {
    scale: { arg: '<f>', default: '1', help: 'multiplies every count, each with a floor (0.05 runs in minutes)' },
    'latency-seconds': {
      arg: '<s>',
      help: `publishing time of each latency level (default 30, times --scale below 1, at
least 2); a verdict on (4) needs at least 30 s per level`,
    },
    chart: {
      arg: '<file>',
      help: `where the latency chart goes (default: docs/latency-vs-load.svg after a full
run, that is both dialects at --scale 1 with 30 s or more per level; a file
under the OS temp dir otherwise)`,
    },
    diagnose: { help: 'also trace each latency level (GCs, event-loop stalls, tail episodes)' },
  },
  parse(read, dialects) {
    const scale = Number(read.string('scale'));
    if (!Number.isFinite(scale) || scale <= 0 || scale > 100) read.problem(`--scale must be a number in (0, 100] (got ${read.string('scale')})`);
    const given = read.string('latency-seconds');
    const latencySeconds = given === undefined ? Math.max(2, FULL_LATENCY_SECONDS * Math.min(1, scale)) : Number(given);
    if (!(Number.isFinite(latencySeconds) && latencySeconds >= 1 && latencySeconds <= 3600))
      read.problem(`--latency-seconds must be seconds in [1, 3600] (got ${given})`);
    const fullRun = dialects.length === 2 && scale >= 1 && latencySeconds >= FULL_LATENCY_SECONDS;
    return {
      scale,
      latencySeconds,
      chartFile: read.string('chart') ?? (fullRun ? CHART_FILE : path.join(os.tmpdir(), 'pending-projector-latency-vs-load.svg')),
      diagnose: read.flag('diagnose'),
      counts: Object.fromEntries(Object.entries(COUNTS).map(([k, [base, floor]]) => [k, Math.max(floor, Math.round(base * scale))])) as Counts,
    };
  },
  header: (options) => [
    `          --latency-seconds ${options.latencySeconds}; counts ${JSON.stringify(options.counts)}`,
    ...(options.latencySeconds < FULL_LATENCY_SECONDS
      ? [
          `note:     ${options.latencySeconds} s per latency level: (4)'s verdict is indicative only; a verdict needs ${FULL_LATENCY_SECONDS} s or more per level.`,
        ]
      : []),
  ],
  async measure(dialect, options, services): Promise<DialectResult> {
    const report = await benchDialect(dialect, options, services);
    reports.push(report);
    const result = workerReport(report, FULL_LATENCY_SECONDS);
    if (options.diagnose) {
      result.after!.push('', `  diagnostics (--diagnose), ${DIALECT_TITLE[dialect]} latency levels:`);
      for (const level of report.latency)
        if (level.diagnosis) result.after!.push(...formatLevelDiagnosis(level.label, level.diagnosis, latencyThresholdMs(report)));
    }
    return result;
  },
  finish(_results, options, info) {
    fs.mkdirSync(path.dirname(options.chartFile), { recursive: true });
    const caption = [
      `${info.date.slice(0, 10)}, ${info.cpu}, ${info.cores} cores; SQLite ${info.versions.sqlite}, PostgreSQL ${info.versions.postgres}, nats-server ${info.versions.natsServer}`,
      `${options.latencySeconds} s of publishing per level, --scale ${options.scale}${options.latencySeconds < FULL_LATENCY_SECONDS ? ` (a verdict needs ${FULL_LATENCY_SECONDS} s per level)` : ''}; worker in its own process`,
    ];
    const series = reports.map((r) => ({ title: DIALECT_TITLE[r.dialect], levels: r.latency, thresholdMs: latencyThresholdMs(r) }));
    fs.writeFileSync(options.chartFile, renderLatencyChart(series, caption));
    return ['', `latency chart written to ${options.chartFile}`];
  },
});
