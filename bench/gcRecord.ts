/**
 * Garbage collections of a benchmark process, recorded where they happen and placed on a phase's
 * timeline afterwards (by wall clock, so the client's and a worker process's line up).
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
