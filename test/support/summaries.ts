import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { topologyFor } from '../../src/contract/subjects.js';

export interface PublishedSummaryEvent {
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

/**
 * Every summary replacement the output stream holds under `prefix`, per task in stream order, read
 * from its first message with an ordered consumer: unlike a subscription, it sees what was published
 * while this process was disconnected (a failover), and exactly what the stream kept.
 */
export async function readSummaryStream(nc: NatsConnection, prefix: string, timeoutMs = 30_000): Promise<Map<string, PublishedSummaryEvent[]>> {
  const topology = topologyFor(prefix);
  const byTask = new Map<string, PublishedSummaryEvent[]>();
  const info = await (await jetstreamManager(nc)).streams.info(topology.outputStream, { subjects_filter: topology.summarySubject });
  if (!info.state.subjects?.[topology.summarySubject]) return byTask;
  // Creating the ordered consumer is a JetStream API call: on a cluster that just lost a node it can
  // time out while the stream's peers settle, so it is retried within the time given.
  const deadline = Date.now() + timeoutMs;
  let messages;
  for (;;) {
    try {
      const consumer = await jetstream(nc, { timeout: 5000 }).consumers.get(topology.outputStream, { filter_subjects: topology.summarySubject });
      messages = await consumer.consume();
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const timer = setTimeout(() => void messages.stop(), timeoutMs);
  try {
    for await (const m of messages) {
      const event = m.json<{ data: PublishedSummaryEvent }>().data;
      byTask.set(event.task_id, [...(byTask.get(event.task_id) ?? []), event]);
      if (m.info.pending === 0) break;
    }
  } finally {
    clearTimeout(timer);
    await messages.close();
  }
  return byTask;
}
