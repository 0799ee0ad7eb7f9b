import type { Logger } from 'pino';
import type { PlanCommentsPayload } from '../../contract/planCommentPayloads.js';
import { TASK_PLAN_DELETED, type TaskPlanDeletedData } from '../../contract/kandevEvents.js';

/** Publishes `task_plan.comments.changed` and `task_plan.deleted` with the given message id (its JetStream `Nats-Msg-Id`). */
export interface PlanCommentEvents {
  publishComments(payload: PlanCommentsPayload, msgId: string): Promise<void>;
  publishPlanDeleted(plan: TaskPlanDeletedData, msgId: string): Promise<void>;
}

/**
 * Issues collection events after a committed change, shared by the plan-comment and prompt services
 * (a prompt that consumes comments changes the collection too).
 *
 * A publish failure is logged once and nothing else: the database is the truth, and the next change
 * publishes the whole collection again. Replies do not wait for the acknowledgement: they carry the
 * same snapshot, and every consumer orders collections by `(plan_id, revision)`, not by arrival.
 * Publishes are issued in commit order on one connection; `settled()` waits for those in flight.
 */
export interface PlanCommentPublisher {
  /** Issues the collection event now; the caller replies without waiting for its acknowledgement. */
  publish(payload: PlanCommentsPayload, msgId?: string): void;
  /** Issues Kandev's `task_plan.deleted` for a committed `plan.delete`, with the deleted plan row. */
  planDeleted(plan: TaskPlanDeletedData): void;
  /** Resolves once every event issued so far was acknowledged or logged as failed. */
  settled(): Promise<void>;
}

/** The message id of a collection event: one per (task, plan, revision). */
function commentsMsgId(snapshot: PlanCommentsPayload): string {
  return `${snapshot.task_id}:${snapshot.plan_id ?? ''}:${snapshot.revision}`;
}

export function createPlanCommentPublisher(events: PlanCommentEvents, logger: Logger): PlanCommentPublisher {
  const log = logger.child({ component: 'plan-comments' });
  const inFlight = new Set<Promise<void>>();
  const track = (published: Promise<void>) => {
    inFlight.add(published);
    void published.finally(() => inFlight.delete(published));
  };
  return {
    publish(payload, msgId = commentsMsgId(payload)) {
      track(
        events.publishComments(payload, msgId).catch((err: unknown) => {
          // Committed already: the database is the truth, and the next change republishes it all.
          log.warn(
            { err, taskId: payload.task_id, planId: payload.plan_id, revision: payload.revision },
            'task_plan.comments.changed not published; the next change of the collection publishes it whole',
          );
        }),
      );
    },
    planDeleted(plan) {
      track(
        // One per deleted plan: a plan id is never reused for another plan of the task.
        events.publishPlanDeleted(plan, `${plan.task_id}:${plan.id}:${TASK_PLAN_DELETED}`).catch((err: unknown) => {
          // Committed already, and nothing republishes it: the plan is gone, as plan_comment.list shows.
          log.warn({ err, taskId: plan.task_id, planId: plan.id }, 'task_plan.deleted not published; the plan is deleted all the same');
        }),
      );
    },
    async settled() {
      while (inFlight.size > 0) await Promise.all(inFlight);
    },
  };
}
