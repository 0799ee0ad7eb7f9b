import type { Logger } from 'pino';
import type { AdmittedWrites } from '../admittedWrites.js';
import type { PlanCommentsPayload } from '../../contract/planCommentPayloads.js';
import type { FinishedScope, PromptStore } from '../../repository/prompts/promptStore.js';
import { snapshotPayload } from '../planCommentWire.js';
import type { QueueStatusEvents } from './queueStatusEvents.js';

export interface QueueLifecycleDeps {
  prompts: PromptStore;
  /** Cancelling returns comments to the collection: a mutation under the task's admission lock. */
  promptWrites: AdmittedWrites<PromptStore>;
  queueStatus: QueueStatusEvents;
  publishComments(plan: PlanCommentsPayload): void;
  logger: Logger;
}

interface SettleReport {
  /** Queues whose waiting entries were cancelled. */
  queues: number;
  /** Entries cancelled. */
  cancelled: number;
  /** Queues that could not be settled now (a lock held too long, a database failure): the next pass tries again. */
  failed: number;
}

export interface QueueLifecycle {
  /** Cancels the waiting entries of every finished queue of the scope; never rejects. */
  settle(scope: FinishedScope): Promise<SettleReport>;
}

/**
 * No entry outlives its session: the worker settles the task's or session's queues on the event
 * that reports an archive, a deletion or a terminal state, and every queue of the database on each
 * reconciliation pass (a missed event). Each cancellation is its own transaction and publishes
 * like a `queue.clear`: the collection event when comments came back, then the queue status
 * (issued: the caller's projection does not wait for it).
 */
export function createQueueLifecycle(deps: QueueLifecycleDeps): QueueLifecycle {
  const log = deps.logger.child({ component: 'queue-lifecycle' });
  return {
    async settle(scope) {
      const report: SettleReport = { queues: 0, cancelled: 0, failed: 0 };
      let finished;
      try {
        finished = await deps.prompts.listFinishedQueues(scope);
      } catch (err) {
        log.error({ scope, err }, 'could not list the queues of finished sessions; the next reconciliation pass tries again');
        return { ...report, failed: 1 };
      }
      for (const queue of finished) {
        try {
          const outcome = await deps.promptWrites.mutate(queue.taskId, (store) => store.cancelFinishedQueue(queue.taskId, queue.sessionId));
          if (!outcome.ok) {
            log.warn({ ...queue, lockTimeoutMs: outcome.lockTimeoutMs }, 'the task stayed locked; its finished queue is cancelled on the next pass');
            report.failed++;
            continue;
          }
          const result = outcome.value;
          if (!result.ok) {
            report.failed++;
            continue;
          }
          if (result.withdrawn.length === 0) continue;
          report.queues++;
          report.cancelled += result.withdrawn.length;
          log.info(
            {
              sessionId: result.sessionId,
              taskId: result.taskId,
              reasons: result.reasons,
              cancelled: result.withdrawn.length,
              dropped: result.droppedCommentIds,
            },
            'cancelled the waiting queue entries of a finished session',
          );
          if (result.snapshot) deps.publishComments(snapshotPayload(result.snapshot));
          deps.queueStatus.issue(result, `revision:${result.revision}`);
        } catch (err) {
          log.error({ ...queue, err }, 'could not cancel the queue of a finished session; the next reconciliation pass tries again');
          report.failed++;
        }
      }
      return report;
    },
  };
}
