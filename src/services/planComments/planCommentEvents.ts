import type { Logger } from 'pino';
import type { PlanCommentsPayload } from '../../contract/planCommentPayloads.js';

/** Publishes `task_plan.comments_updated` with the given message id (its JetStream `Nats-Msg-Id`). */
export interface PlanCommentEvents {
  publishComments(payload: PlanCommentsPayload, msgId: string): Promise<void>;
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
  /** Resolves once every collection event issued so far was acknowledged or logged as failed. */
  settled(): Promise<void>;
}

/** The message id of a collection event: one per (task, plan, revision). */
function commentsMsgId(snapshot: PlanCommentsPayload): string {
  return `${snapshot.task_id}:${snapshot.plan_id ?? ''}:${snapshot.revision}`;
}

export function createPlanCommentPublisher(events: PlanCommentEvents, logger: Logger): PlanCommentPublisher {
  const log = logger.child({ component: 'plan-comments' });
  const inFlight = new Set<Promise<void>>();
  return {
    publish(payload, msgId = commentsMsgId(payload)) {
      const published = events.publishComments(payload, msgId).catch((err: unknown) => {
        // Committed already: the database is the truth, and the next change republishes it all.
        log.warn(
          { err, taskId: payload.task_id, planId: payload.plan_id, revision: payload.revision },
          'task_plan.comments_updated not published; the next change of the collection publishes it whole',
        );
      });
      inFlight.add(published);
      void published.finally(() => inFlight.delete(published));
    },
    async settled() {
      while (inFlight.size > 0) await Promise.all(inFlight);
    },
  };
}
