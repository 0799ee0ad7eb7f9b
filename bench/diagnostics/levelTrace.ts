/**
 * --diagnose for the latency levels (4): what each process went through while a level was timed,
 * to tell a stall from queueing. Off by default: the probes cost the processes they watch a little,
 * and none of this is a figure with a target.
 *
 * - publish → the worker's read of the task's state, and read → summary received: the summary's
 *   updated_at is the worker's wall clock when it read the state;
 * - this (client) process's event-loop delay and GCs: arrivals are timestamped on its loop, so a
 *   stall here adds to every sample waiting in it;
 * - the worker process's GCs and event-loop stalls over 5 ms;
 * - the samples over a threshold, grouped into episodes by publish time.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { timestampToMicros } from '../../src/timestamps.js';
import type { PacedRun } from '../latencyLevels.js';
import { f1, f2, int } from '../harness.js';
import { recordGc, summarizeGc, summarizeStalls, type GcEntry, type GcSummary, type ProcessTrace, type StallSummary } from './processTrace.js';
import { tailEpisodes } from './tailEpisodes.js';

export interface LevelDiagnosis {
  /** Publish → the worker read the task's state (stream, delivery, the wait for a projection transaction), ms. */
  beforeRead: number[];
  /** The worker read the state → the summary arrived here (compare-and-set, publish, delivery), ms. */
  afterRead: number[];
  /** Publish → summary and publish time (ms into the run) of every event, for the tail episodes. */
  samples: number[];
  sentAtMs: number[];
  clientLoopDelayMs: { p99: number; max: number };
  clientGc: GcSummary;
  workerGc: GcSummary;
  workerStalls: StallSummary;
}

export interface LevelTrace {
  onArrival(index: number, payload: Uint8Array): void;
  finish(run: PacedRun): Promise<LevelDiagnosis>;
}

/** What the trace needs from the worker process under test. */
export interface TracedProcess {
  /** Its GCs and stalls since the last call. */
  trace(): Promise<ProcessTrace>;
}

/** Starts tracing a level of `count` events; call right before its timed run. */
export async function startLevelTrace(count: number, worker: TracedProcess): Promise<LevelTrace> {
  await worker.trace();
  const readAt = new Float64Array(count).fill(Number.NaN);
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const gcEntries: GcEntry[] = [];
  const stopGc = recordGc((entry) => gcEntries.push(entry));
  return {
    onArrival(index, payload) {
      readAt[index] = readInstantMs(payload);
    },
    async finish(run) {
      loop.disable();
      // The GC observer reports asynchronously: let the run's last collections arrive.
      await new Promise((resolve) => setImmediate(resolve));
      stopGc();
      const startedAtEpochMs = performance.timeOrigin + run.startedAt;
      const workerTrace = await worker.trace();
      return {
        beforeRead: Array.from(readAt, (at, i) => at - run.sentAt[i]!),
        afterRead: Array.from(readAt, (at, i) => run.arrivedAt[i]! - at),
        samples: run.samples,
        sentAtMs: Array.from(run.sentAt, (at) => at - run.startedAt),
        clientLoopDelayMs: { p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 },
        clientGc: summarizeGc(gcEntries, startedAtEpochMs),
        workerGc: summarizeGc(workerTrace.gc, startedAtEpochMs),
        workerStalls: summarizeStalls(workerTrace.stalls, startedAtEpochMs),
      };
    },
  };
}

const UPDATED_AT_KEY = new TextEncoder().encode('"updated_at":"');
const QUOTE = 0x22;
const latin1 = new TextDecoder('latin1');

/**
 * When the worker read the task's state, on this process's performance clock: the summary's
 * updated_at, found in the payload bytes without parsing the envelope (a summary this benchmark's
 * worker published carries one updated_at, a JSON string without escapes). Millisecond resolution.
 */
function readInstantMs(payload: Uint8Array): number {
  const first = UPDATED_AT_KEY[0]!;
  for (let at = payload.indexOf(first); at >= 0; at = payload.indexOf(first, at + 1)) {
    let k = 1;
    while (k < UPDATED_AT_KEY.length && payload[at + k] === UPDATED_AT_KEY[k]) k++;
    if (k < UPDATED_AT_KEY.length) continue;
    const start = at + k;
    const end = payload.indexOf(QUOTE, start);
    if (end < 0) break;
    return timestampToMicros(latin1.decode(payload.subarray(start, end))) / 1000 - performance.timeOrigin;
  }
  return Number.NaN;
}

function percentileOf(values: readonly number[], p: number): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

function gcLine(gc: GcSummary): string {
  const majorAt = gc.majorAtMs.length ? `; major at ${gc.majorAtMs.map((ms) => `+${int(ms)}`).join(', ')} ms` : '';
  return `${gc.minor} minor / ${gc.major} major, ${f1(gc.totalMs)} ms in all, longest ${f1(gc.maxMs)} ms${majorAt}`;
}

/** The diagnosis of one level, a few indented lines; `thresholdMs` splits the tail episodes off. */
export function formatLevelDiagnosis(label: string, d: LevelDiagnosis, thresholdMs: number): string[] {
  const tail = tailEpisodes(d.samples, d.sentAtMs, thresholdMs);
  const largest = tail.largest
    ? `; the largest: ${tail.largest.count} samples published within ${int(tail.largest.spanMs)} ms from +${int(tail.largest.startMs)} ms (event ${int(tail.largest.startEvent)}), worst ${f1(tail.largest.maxMs)} ms`
    : '';
  const stalls = d.workerStalls;
  return [
    `  ${label}:`,
    `    publish -> worker read p50 / p99 ${f2(percentileOf(d.beforeRead, 50))} / ${f2(percentileOf(d.beforeRead, 99))} ms; read -> received ${f2(percentileOf(d.afterRead, 50))} / ${f2(percentileOf(d.afterRead, 99))} ms`,
    `    samples over ${f1(thresholdMs)} ms: ${tail.count} (${f2((tail.count * 100) / d.samples.length)}%) in ${tail.episodes} episode(s)${largest}`,
    `    client event-loop delay p99 / max ${f2(d.clientLoopDelayMs.p99)} / ${f2(d.clientLoopDelayMs.max)} ms; client GC ${gcLine(d.clientGc)}`,
    `    worker GC ${gcLine(d.workerGc)}`,
    `    worker event-loop stalls over 5 ms: ${stalls.count}${stalls.count ? `, longest ${f1(stalls.maxMs)} ms at ${stalls.longest.map((s) => `+${int(s.atMs)} (${f1(s.ms)} ms)`).join(', ')}` : ''}`,
  ];
}
