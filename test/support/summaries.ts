import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { topologyFor } from '../../src/contract/subjects.js';

interface PublishedSummaryEvent {
  task_id: string;
  workspace_id: string;
  status_summary: { revision: number; updated_at: string; pending_action?: string } & Record<string, unknown>;
}

/** Collects every summary replacement published under `prefix`, in arrival order. */
export function collectSummaries(nc: NatsConnection, prefix: string) {
  const events: PublishedSummaryEvent[] = [];
  const sub: Subscription = nc.subscribe(topologyFor(prefix).summarySubject);
  void (async () => {
    for await (const m of sub) {
      const envelope = JSON.parse(new TextDecoder().decode(m.data)) as { type: string; source: string; data: PublishedSummaryEvent };
      events.push(envelope.data);
    }
  })();
  return {
    events,
    forTask: (taskId: string) => events.filter((e) => e.task_id === taskId),
    latest: (taskId: string) => events.filter((e) => e.task_id === taskId).at(-1),
    stop: () => sub.unsubscribe(),
  };
}
