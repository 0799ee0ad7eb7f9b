import { randomUUID } from 'node:crypto';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { PlanCommentEvents } from '../../services/planComments/planCommentService.js';
import type { PlanCommentsPayload } from '../../contract/planCommentPayloads.js';
import type { TaskPlanDeletedData } from '../../contract/kandevEvents.js';
import type { Clock } from '../../timestamps.js';
import { createEnvelope } from '../../contract/envelope.js';
import { PLAN_COMMENTS_CHANGED, TASK_PLAN_DELETED, type Topology } from '../../contract/subjects.js';

const encoder = new TextEncoder();

/**
 * Publishes a task's whole plan-comment collection as the standard envelope on
 * `<prefix>task_plan.comments.changed`, through JetStream (the output stream captures it) with
 * `Nats-Msg-Id` = `msgId` (`task_id:plan_id:revision`), so a repeated publish of one revision is
 * dropped within the stream's duplicate window. Clients keep the highest (plan_id, revision).
 * A deleted plan goes out the same way as Kandev's `task_plan.deleted` on `<prefix>task_plan.deleted`.
 */
export class NatsPlanCommentPublisher implements PlanCommentEvents {
  private readonly js: JetStreamClient;

  constructor(
    nc: NatsConnection,
    private readonly topology: Topology,
    private readonly clock: Clock,
    timeoutMs = 5000,
  ) {
    this.js = jetstream(nc, { timeout: timeoutMs });
  }

  async publishComments(payload: PlanCommentsPayload, msgId: string): Promise<void> {
    const subject = this.topology.planCommentsSubject;
    const envelope = createEnvelope(PLAN_COMMENTS_CHANGED, subject, { ...payload }, randomUUID(), this.clock());
    const h = headers();
    h.set('Pending-Projector-Task-Id', payload.task_id);
    h.set('Pending-Projector-Revision', String(payload.revision));
    await this.js.publish(subject, encoder.encode(JSON.stringify(envelope)), { msgID: msgId, headers: h });
  }

  async publishPlanDeleted(plan: TaskPlanDeletedData, msgId: string): Promise<void> {
    const subject = this.topology.planDeletedSubject;
    const envelope = createEnvelope(TASK_PLAN_DELETED, subject, { ...plan }, randomUUID(), this.clock());
    const h = headers();
    h.set('Pending-Projector-Task-Id', plan.task_id);
    await this.js.publish(subject, encoder.encode(JSON.stringify(envelope)), { msgID: msgId, headers: h });
  }
}
