/**
 * --diagnose: where a latency tail comes from. Samples above a threshold, grouped by when they were
 * published: a few dense episodes mean a stall and the backlog it left (below the worker's capacity
 * a backlog drains at about the rate it formed), a thin spread means steady-state queueing.
 */

export interface TailEpisodes {
  /** Samples above the threshold. */
  count: number;
  /** Runs of them, split where publishes were more than `gapMs` apart. */
  episodes: number;
  /**
   * The run holding the most of them: its sample count, first publish (ms into the phase, and which
   * event of the phase, counting from 1), span and worst latency (ms).
   */
  largest: { count: number; startMs: number; startEvent: number; spanMs: number; maxMs: number } | undefined;
}

/** Samples above `thresholdMs`, grouped into runs whose publishes are at most `gapMs` apart. */
export function tailEpisodes(samples: readonly number[], sentAt: readonly number[], thresholdMs: number, gapMs = 100): TailEpisodes {
  const slow = sentAt
    .map((at, i) => ({ at, ms: samples[i]! }))
    .filter((s) => s.ms > thresholdMs)
    .sort((a, b) => a.at - b.at);
  const runs: Array<Array<{ at: number; ms: number }>> = [];
  for (const s of slow) {
    const run = runs[runs.length - 1];
    if (run && s.at - run[run.length - 1]!.at <= gapMs) run.push(s);
    else runs.push([s]);
  }
  const largest = runs.reduce<(typeof runs)[number] | undefined>((best, run) => (!best || run.length > best.length ? run : best), undefined);
  return {
    count: slow.length,
    episodes: runs.length,
    largest: largest && {
      count: largest.length,
      startMs: largest[0]!.at,
      // Events are published in order, so the ones published before it say which it was.
      startEvent: sentAt.filter((at) => at < largest[0]!.at).length + 1,
      spanMs: largest[largest.length - 1]!.at - largest[0]!.at,
      maxMs: Math.max(...largest.map((s) => s.ms)),
    },
  };
}
