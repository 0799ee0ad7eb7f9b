/**
 * --diagnose: what a benchmark process's own event loop went through (garbage collections, stalls),
 * recorded where it happens and placed on a phase's timeline afterwards, by wall clock, so the
 * client's and a worker process's line up.
 */
import { performance, PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';

/** One garbage collection: major or not, when it started (ms since the epoch) and its pause (ms). */
export interface GcEntry {
  major: boolean;
  atEpochMs: number;
  ms: number;
}

export interface GcSummary {
  minor: number;
  major: number;
  totalMs: number;
  maxMs: number;
  /** When each major collection started, in ms since `fromEpochMs`. */
  majorAtMs: number[];
}

/** Hands each of this process's garbage collections to `onEntry` until the returned function is called. */
export function recordGc(onEntry: (entry: GcEntry) => void): () => void {
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      onEntry({ major: kind !== perfConstants.NODE_PERFORMANCE_GC_MINOR, atEpochMs: performance.timeOrigin + entry.startTime, ms: entry.duration });
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return () => observer.disconnect();
}

/** The collections that started at or after `fromEpochMs`. */
export function summarizeGc(entries: readonly GcEntry[], fromEpochMs: number): GcSummary {
  const summary: GcSummary = { minor: 0, major: 0, totalMs: 0, maxMs: 0, majorAtMs: [] };
  for (const e of entries) {
    if (e.atEpochMs < fromEpochMs) continue;
    if (e.major) {
      summary.major++;
      summary.majorAtMs.push(Math.round(e.atEpochMs - fromEpochMs));
    } else summary.minor++;
    summary.totalMs += e.ms;
    summary.maxMs = Math.max(summary.maxMs, e.ms);
  }
  return summary;
}

/** What a process recorded about itself since it was last asked. */
export interface ProcessTrace {
  gc: GcEntry[];
  stalls: Stall[];
}

// Entries kept between two asks at most: a bound, not a leak, when nobody asks.
const TRACE_LIMIT = 10_000;

/** Records this process's GCs and stalls; `take()` hands over what was recorded since the last take. */
export function startProcessTrace(): { take(): ProcessTrace } {
  let trace: ProcessTrace = { gc: [], stalls: [] };
  recordGc((entry) => {
    if (trace.gc.length < TRACE_LIMIT) trace.gc.push(entry);
  });
  recordStalls((stall) => {
    if (trace.stalls.length < TRACE_LIMIT) trace.stalls.push(stall);
  });
  return {
    take() {
      const taken = trace;
      trace = { gc: [], stalls: [] };
      return taken;
    },
  };
}

/** The event loop ran `ms` late, from `atEpochMs` (ms since the epoch). */
export interface Stall {
  atEpochMs: number;
  ms: number;
}

export interface StallSummary {
  count: number;
  maxMs: number;
  /** The longest few, by when they began (ms since `fromEpochMs`), with their length. */
  longest: Array<{ atMs: number; ms: number }>;
}

const STALL_PROBE_MS = 10;

/**
 * Hands `onStall` every time this process's event loop ran more than `thresholdMs` late: a timer
 * every 10 ms (cheap beside the work measured) that sees when it fired. Synchronous work blocks it:
 * a better-sqlite3 statement waiting on the disk, a GC pause, a long callback.
 */
function recordStalls(onStall: (stall: Stall) => void, thresholdMs = 5): () => void {
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - STALL_PROBE_MS;
    if (late > thresholdMs) onStall({ atEpochMs: performance.timeOrigin + last + STALL_PROBE_MS, ms: late });
    last = now;
  }, STALL_PROBE_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** The stalls that began at or after `fromEpochMs`. */
export function summarizeStalls(stalls: readonly Stall[], fromEpochMs: number, keep = 3): StallSummary {
  const inPhase = stalls.filter((s) => s.atEpochMs >= fromEpochMs);
  const longest = [...inPhase]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, keep)
    .sort((a, b) => a.atEpochMs - b.atEpochMs)
    .map((s) => ({ atMs: Math.round(s.atEpochMs - fromEpochMs), ms: s.ms }));
  return { count: inPhase.length, maxMs: Math.max(0, ...inPhase.map((s) => s.ms)), longest };
}
