import { randomUUID } from 'node:crypto';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { PublishOutcome, SessionPendingActionUpdate, SummaryPublisher, SummaryUpdate } from '../projectors/ports.js';
import type { Clock } from '../timestamps.js';
import { createEnvelope } from '../contract/envelope.js';
import { SESSION_PENDING_ACTION_CHANGED, SUMMARY_UPDATED, type Topology } from '../contract/subjects.js';
import { summaryKey } from './natsTopology.js';
import type { SummaryBucket } from './summaryBucket.js';

const encoder = new TextEncoder();

/**
 * Publishes projections to JetStream: the full summary replacement on
 * `<prefix>task.status_summary.updated` with `Nats-Msg-Id: <task_id>:<revision>`, then the same
 * payload into the KV bucket so late joiners read the latest summary per task. The stream drops a
 * second publish of a revision within its duplicate window; that is reported as `duplicate`, and
 * nothing is put.
 */
export class NatsSummaryPublisher implements SummaryPublisher {
  private readonly js: JetStreamClient;

  constructor(
    nc: NatsConnection,
    private readonly topology: Topology,
    private readonly summaries: SummaryBucket,
    private readonly clock: Clock,
    timeoutMs = 5000,
  ) {
    this.js = jetstream(nc, { timeout: timeoutMs });
  }

  async publishSummary(update: SummaryUpdate): Promise<PublishOutcome> {
    const payload = this.summaryEnvelope(update);
    const h = headers();
    h.set('Pending-Projector-Task-Id', update.taskId);
    h.set('Pending-Projector-Revision', String(update.summary.revision));
    const ack = await this.js.publish(this.topology.summarySubject, payload, { msgID: `${update.taskId}:${update.summary.revision}`, headers: h });
    // The stream kept an earlier payload of this revision; putting this one in the bucket would
    // make the two copies disagree.
    if (ack.duplicate) return 'duplicate';
    await this.summaries.put(summaryKey(update.taskId), payload);
    return 'published';
  }

  /**
   * Puts a stored summary into the KV bucket if its key is empty (refilling a bucket the server
   * lost), without publishing it: it is no change. Resolves to false when the key was taken.
   */
  fillSummary(update: SummaryUpdate): Promise<boolean> {
    return this.summaries.fill(summaryKey(update.taskId), this.summaryEnvelope(update));
  }

  private summaryEnvelope(update: SummaryUpdate): Uint8Array {
    const envelope = createEnvelope(
      SUMMARY_UPDATED,
      this.topology.summarySubject,
      { task_id: update.taskId, workspace_id: update.workspaceId, status_summary: update.summary },
      randomUUID(),
      this.clock(),
    );
    return encoder.encode(JSON.stringify(envelope));
  }

  async publishSessionPendingActions(updates: readonly SessionPendingActionUpdate[]): Promise<void> {
    await Promise.all(
      updates.map((u) => {
        const envelope = createEnvelope(
          SESSION_PENDING_ACTION_CHANGED,
          this.topology.sessionPendingSubject,
          { workspace_id: u.workspaceId, task_id: u.taskId, session_id: u.sessionId, pending_action: u.pendingAction, pending_action_revision: u.revision },
          randomUUID(),
          this.clock(),
        );
        // No msg id: a failed session publish is never repeated (the tasks are projected again, under
        // a new sequence), so ids would only fill the stream's duplicate window, which nats-server
        // keeps in memory and grows by doubling on the publish path.
        return this.js.publish(this.topology.sessionPendingSubject, encoder.encode(JSON.stringify(envelope)));
      }),
    );
  }
}
