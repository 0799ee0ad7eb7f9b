import type { Metrics } from '../../metrics.js';
import type { ReplicaStatsSource } from '../../services/operations/operationsService.js';

export interface ReplicaStatsDeps {
  /** The owner name of this replica's partition leases: an operator matches the two. */
  replica: string;
  startedAt: string;
  metrics: Metrics;
  /** The partitions this replica pulls now. */
  heldPartitions(): number[];
}

/**
 * `replica.stats` of this process: its `events` counter by outcome, read from the registry it
 * serves on `/metrics`, so the endpoint and a scrape of this replica agree.
 */
export function replicaStatsSource({ replica, startedAt, metrics, heldPartitions }: ReplicaStatsDeps): ReplicaStatsSource {
  return {
    async read() {
      const events_by_outcome: Record<string, number> = {};
      for (const { labels, value } of (await metrics.events.get()).values) {
        const outcome = String(labels.outcome ?? '');
        events_by_outcome[outcome] = (events_by_outcome[outcome] ?? 0) + value;
      }
      return { replica, started_at: startedAt, events_by_outcome, partitions: [...heldPartitions()].sort((a, b) => a - b) };
    },
  };
}
