import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Topology } from '../../src/contract/subjects.js';

/** A task's summary as it was last published: the envelope's `data.status_summary`. */
type PublishedStatusSummary = { revision: number; pending_action?: string; queued_prompt_count?: number } & Record<string, unknown>;

/**
 * Watches every summary the summary stream stores, in stream order, through an ordered consumer
 * (which survives nats-server restarts by recreating itself from the last sequence it saw), and
 * checks per task, as they arrive, that revisions never go backwards.
 *
 * The stream rather than a core subscription: a core subscriber also sees a publish the stream
 * refused, and late joiners read the stream. A repeat of the task's last revision is a duplicate:
 * allowed when its content is the same (a retried publish the dedupe window let through), a
 * violation when it differs (two summaries under one revision).
 */
export interface RevisionMonitor {
  readonly counts: { published: number; duplicates: number };
  readonly violations: string[];
  latest(taskId: string): PublishedStatusSummary | undefined;
  /** When the last summary arrived (ms since the epoch), or 0. */
  lastArrivalMs(): number;
  stop(): void;
}

export async function startRevisionMonitor(nc: NatsConnection, topology: Topology): Promise<RevisionMonitor> {
  const consumer = await jetstream(nc).consumers.get(topology.outputStream, { filter_subjects: topology.summarySubject });
  const messages = await consumer.consume();
  const last = new Map<string, { summary: PublishedStatusSummary; text: string }>();
  const counts = { published: 0, duplicates: 0 };
  const violations: string[] = [];
  let lastArrival = 0;
  void (async () => {
    for await (const m of messages) {
      lastArrival = Date.now();
      counts.published++;
      let taskId: string;
      let summary: PublishedStatusSummary;
      try {
        ({ task_id: taskId, status_summary: summary } = (m.json() as { data: { task_id: string; status_summary: PublishedStatusSummary } }).data);
      } catch (err) {
        violations.push(`stream seq ${m.seq}: not a summary envelope (${(err as Error).message})`);
        continue;
      }
      const text = JSON.stringify(summary);
      const before = last.get(taskId);
      if (before && summary.revision < before.summary.revision) {
        violations.push(`task ${taskId}: revision ${summary.revision} published after ${before.summary.revision} (stream seq ${m.seq})`);
        continue;
      }
      if (before && summary.revision === before.summary.revision) {
        counts.duplicates++;
        if (text !== before.text) violations.push(`task ${taskId}: revision ${summary.revision} published twice with different content (stream seq ${m.seq})`);
        continue;
      }
      last.set(taskId, { summary, text });
    }
  })();
  return {
    counts,
    violations,
    latest: (taskId) => last.get(taskId)?.summary,
    lastArrivalMs: () => lastArrival,
    stop: () => void messages.stop(),
  };
}
