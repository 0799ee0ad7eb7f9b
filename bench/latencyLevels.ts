/**
 * (4) Latency against load: publish → summary at several paces, each a share of the bare limit (1)
 * or of the worker's own throughput (2) measured earlier in the same run, each paced for the same
 * wall-clock time, so every level meets the host's stalls (run-queue waits, GC of nats-server and of
 * the worker) alike. The worker is compared with itself: its p99 at 25% and at 50% of (1) against
 * its p99 at a trickle (5% of (1)).
 */
import { performance } from 'node:perf_hooks';
import { WrongAnswerError, percentile, sleep } from './harness.js';
import type { LevelDiagnosis, LevelTrace } from './diagnostics/levelTrace.js';
import { sessionStateChanged } from './bus.js';
import { sessionStatesOf } from './seed/seeder.js';
import type { BenchEnv } from './workerPhases.js';

export const TARGET_P99_OVER_TRICKLE = 2;

export type LevelRole = 'trickle' | 'target' | 'context';

export interface LatencyLevel {
  /** The pace as a share of a figure measured before, e.g. "25% of (1)". */
  label: string;
  role: LevelRole;
  /** Events per second the publisher is asked for. */
  offeredRate: number;
}

/** The levels in the order they run: rising load, so no level inherits a backlog from a heavier one. */
export function latencyLevels(limitRate: number, distinctRate: number): LatencyLevel[] {
  return [
    { label: '5% of (1)', role: 'trickle', offeredRate: 0.05 * limitRate },
    { label: '25% of (1)', role: 'target', offeredRate: 0.25 * limitRate },
    { label: '50% of (1)', role: 'target', offeredRate: 0.5 * limitRate },
    { label: '75% of (1)', role: 'context', offeredRate: 0.75 * limitRate },
    { label: '50% of (2)', role: 'context', offeredRate: 0.5 * distinctRate },
  ];
}

/** Events a level publishes: its pace for `seconds`. */
export const levelEventCount = (level: LatencyLevel, seconds: number) => Math.max(1, Math.round(level.offeredRate * seconds));

export interface PacedRun {
  /** Per event (index into the task list): when it was published and when its summary arrived (performance.now(), ms). */
  sentAt: Float64Array;
  arrivedAt: Float64Array;
  /** Publish → summary of every event, ms, in publish order. */
  samples: number[];
  /** performance.now() at the first publish. */
  startedAt: number;
  offeredRate: number;
  /** Summaries received per second, from the first publish to the last summary. */
  achievedRate: number;
}

/** Quiet time after this process's full collection before a timed run begins. */
const AFTER_GC_MS = 250;
/** How long the last summaries may take after the last publish before the run counts as lost. */
const ARRIVAL_DEADLINE_MS = 30_000;

/**
 * A paced publisher at `ratePerSecond`: one state_changed event per listed (stale) task, through
 * core NATS as Kandev publishes; latency from the publish call to the summary's arrival at a
 * client watching the summary subject. `onArrival` sees each event's summary as it arrives (the
 * diagnostics read the worker's timestamps from it).
 */
export async function measurePaced(
  env: BenchEnv,
  taskIds: readonly string[],
  ratePerSecond: number,
  onArrival?: (index: number, payload: Uint8Array) => void,
): Promise<PacedRun> {
  const subject = `${env.topology.prefix}task_session.state_changed`;
  const states = await sessionStatesOf(env.ctx, taskIds);
  const payloads = taskIds.map((id) => sessionStateChanged(id, env.sessionOf.get(id), states.get(id)));
  const count = taskIds.length;
  const indexOf = new Map(taskIds.map((id, i) => [id, i]));
  // Everything the run records goes into arrays allocated here, so it retains nothing per arrival:
  // a summary's payload is a view of the socket chunk it arrived in, and keeping those grows the
  // old generation until this process pauses for a major GC mid-run.
  const sentAt = new Float64Array(count).fill(Number.NaN);
  const arrivedAt = new Float64Array(count).fill(Number.NaN);
  let arrived = 0;
  let lastArrival = 0;
  env.watcher.listen((id, at, payload) => {
    const i = indexOf.get(id);
    // The first summary after the event was published is its sample.
    if (i === undefined || Number.isNaN(sentAt[i]!) || !Number.isNaN(arrivedAt[i]!)) return;
    arrivedAt[i] = at;
    lastArrival = at;
    arrived++;
    onArrival?.(i, payload);
  });
  try {
    const intervalMs = 1000 / ratePerSecond;
    (globalThis as { gc?: () => void }).gc?.();
    // A full collection leaves its sweeping to helper threads: on a 2-core host they would take CPU
    // from the worker, nats-server and the database through the first samples.
    await sleep(AFTER_GC_MS);
    const startedAt = performance.now();
    for (let i = 0; i < count;) {
      const now = performance.now();
      const due = startedAt + i * intervalMs;
      if (now < due) {
        await sleep(Math.max(0, due - now));
        continue;
      }
      // Catch up on every slot that is due (timers fire late by a millisecond or so).
      while (i < count && startedAt + i * intervalMs <= performance.now()) {
        sentAt[i] = performance.now();
        env.nc.publish(subject, payloads[i]!);
        i++;
      }
    }
    const deadline = performance.now() + ARRIVAL_DEADLINE_MS;
    while (arrived < count) {
      if (performance.now() > deadline)
        throw new WrongAnswerError(`latency: ${arrived} summaries for ${count} changed tasks ${ARRIVAL_DEADLINE_MS / 1000} s after the last publish`);
      await sleep(5);
    }
    const samples = Array.from(sentAt, (t0, i) => arrivedAt[i]! - t0);
    return { sentAt, arrivedAt, samples, startedAt, offeredRate: ratePerSecond, achievedRate: (count * 1000) / (lastArrival - startedAt) };
  } finally {
    env.watcher.listen(undefined);
  }
}

export interface LevelResult extends LatencyLevel {
  events: number;
  achievedRate: number;
  p50: number;
  p99: number;
  /** What --diagnose recorded over the level. */
  diagnosis?: LevelDiagnosis;
}

/** What a latency run needs from the bench around it. */
export interface LatencyRunDeps {
  env: BenchEnv;
  /** Tasks whose stored summaries are current; each level toggles as many as it publishes events. */
  pool: readonly string[];
  /** Tasks apart from the pool, for the warm-up before each level. */
  warm: readonly string[];
  toggle(taskIds: readonly string[]): Promise<void>;
  /** Folds the toggle's bulk write away (vacuum, checkpoint) before the level is timed. */
  settle(): Promise<void>;
  progress(line: string): void;
  /** --diagnose: traces a level and returns what it found. */
  trace?: (count: number) => Promise<LevelTrace>;
}

// Before the first level the worker process is new: its code must be optimised and its pool busy,
// as in a worker that has been running for a while, so it first gets rounds at the heaviest target
// pace. Each level then gets one round at its own pace right before it is timed.
const FIRST_WARMUP_ROUNDS = 5;

/** Runs every level for `seconds` of publishing each, against the worker process already consuming. */
export async function measureLatencyLevels(deps: LatencyRunDeps, levels: readonly LatencyLevel[], seconds: number): Promise<LevelResult[]> {
  const results: LevelResult[] = [];
  const heaviestTarget = Math.max(...levels.filter((l) => l.role === 'target').map((l) => l.offeredRate));
  for (let round = 0; round < FIRST_WARMUP_ROUNDS; round++) {
    await deps.toggle(deps.warm);
    await measurePaced(deps.env, deps.warm, heaviestTarget);
  }
  for (const [n, level] of levels.entries()) {
    const events = levelEventCount(level, seconds);
    if (events > deps.pool.length) throw new Error(`latency: ${level.label} needs ${events} tasks, the pool holds ${deps.pool.length}`);
    const taskIds = deps.pool.slice(0, events);
    deps.progress(`  ${level.label}: ${events} events at ${Math.round(level.offeredRate)}/s (${seconds} s)`);
    await deps.toggle(taskIds);
    await deps.settle();
    await deps.toggle(deps.warm);
    await measurePaced(deps.env, deps.warm, level.offeredRate);
    const trace = await deps.trace?.(events);
    const run = await measurePaced(deps.env, taskIds, level.offeredRate, trace?.onArrival);
    const diagnosis = await trace?.finish(run);
    results.push({ ...level, events, achievedRate: run.achievedRate, p50: percentile(run.samples, 50), p99: percentile(run.samples, 99), diagnosis });
    deps.progress(`    p50 ${results[n]!.p50.toFixed(2)} ms, p99 ${results[n]!.p99.toFixed(2)} ms, ${Math.round(run.achievedRate)} summaries/s`);
  }
  return results;
}
