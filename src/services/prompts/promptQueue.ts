import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { EndpointReplyOf } from '../../contract/endpoints.js';
import type { z } from 'zod';
import type { AdmittedWrites } from '../admittedWrites.js';
import type { AcceptPromptInput, AcceptPromptResult, PromptStore } from '../../repository/prompts/promptStore.js';
import type {
  queueClearSchema,
  queueDrainSchema,
  queueEnqueueSchema,
  queueListSchema,
  queueRemoveSchema,
  queueReorderSchema,
  queueSetAutoRunSchema,
  queueUpdateSchema,
} from '../../contract/planCommentRequests.js';
import type { QueueWithdrawalReply } from '../../contract/planCommentReplies.js';
import type { WithdrawInput } from '../../repository/prompts/promptStore.js';
import { admissionPayload, lockTimeoutFailure, queueEntryPayload, reasoned, snapshotPayload, storeFailure } from '../planCommentWire.js';
import type { PlanCommentsPayload } from '../../contract/planCommentPayloads.js';
import type { PromptDispatch } from './promptDispatch.js';
import type { QueueStatusEvents } from './queueStatusEvents.js';
import type { PromptTargets } from './promptTargets.js';
import { NO_FAILPOINTS, type Failpoints } from '../../failpoints.js';

/**
 * The prompt queue's endpoints: `queue.enqueue`, `queue.list`, `queue.remove` and `queue.clear`.
 *
 * An enqueue is the accepting transaction with `deliveryKind: 'queued'`: it writes only the queue
 * entry (its receipt), and no turn-start hook runs (the dispatcher runs it at delivery). Carrying
 * comment refs it runs as one admission **mutation** of the task: with no hook between a preflight
 * and the transaction there is nothing to hold a lease around, and the transaction re-validates
 * everything itself. Without refs it takes no admission lock, as a send without refs.
 *
 * After COMMIT a new entry publishes `task_plan.comments.changed` (when it consumed comments) and
 * `message.queue.status_changed` (which the worker's events stream captures, so the task's
 * `queued_prompt_count` is reprojected), then kicks the dispatcher. If the bus refuses the status
 * event the summary is refreshed directly (`publishOrRefresh`), so the count converges anyway.
 *
 * A removal is one admission mutation of the task too (it may give comments back to the
 * collection), and publishes the same two events once it committed anything.
 */

export interface PromptQueueDeps {
  prompts: PromptStore;
  /** The prompt store's writes under the task's admission lock (a queued prompt carrying refs). */
  promptWrites: AdmittedWrites<PromptStore>;
  targets: PromptTargets;
  dispatch: PromptDispatch;
  /** `message.queue.status_changed` after every change, issued after the reply (queueStatusEvents.ts). */
  queueStatus: QueueStatusEvents;
  queueMaxPerSession: number;
  /** Issues a consumed collection's event (the shared collection publisher; not awaited). */
  publishComments(plan: PlanCommentsPayload): void;
  /** Test-only boundaries (before_withdrawal_commit, before_reorder_commit); none unless a crash test's worker entry passes armed ones. */
  failpoints?: Failpoints;
  logger: Logger;
}

export interface PromptQueue {
  enqueue(request: z.output<typeof queueEnqueueSchema>): Promise<EndpointReplyOf<'enqueue'>>;
  list(request: z.output<typeof queueListSchema>): Promise<EndpointReplyOf<'listQueue'>>;
  remove(request: z.output<typeof queueRemoveSchema>): Promise<EndpointReplyOf<'removeQueueEntry'>>;
  clear(request: z.output<typeof queueClearSchema>): Promise<EndpointReplyOf<'clearQueue'>>;
  update(request: z.output<typeof queueUpdateSchema>): Promise<EndpointReplyOf<'updateQueueEntry'>>;
  reorder(request: z.output<typeof queueReorderSchema>): Promise<EndpointReplyOf<'reorderQueue'>>;
  setAutoRun(request: z.output<typeof queueSetAutoRunSchema>): Promise<EndpointReplyOf<'setQueueAutoRun'>>;
  drain(request: z.output<typeof queueDrainSchema>): Promise<EndpointReplyOf<'drainQueue'>>;
  /** A queued prompt the caller addressed itself (a Run behind a busy primary): accepted, kicked and published like an enqueue. */
  admit(input: Omit<AcceptPromptInput, 'deliveryKind' | 'queueMaxPerSession'> & { target: { taskId: string } }): Promise<EndpointReplyOf<'enqueue'>>;
}

export function createPromptQueue(deps: PromptQueueDeps): PromptQueue {
  const { prompts, promptWrites, targets } = deps;
  const max = deps.queueMaxPerSession;
  const failpoints = deps.failpoints ?? NO_FAILPOINTS;
  const withdrawalFailpoint = () => failpoints.reach('before_withdrawal_commit');

  return {
    async enqueue(r) {
      const session = await targets.session(r.session_id);
      if (!session) return reasoned('not_found', 'session_not_found', `session ${r.session_id} does not exist`);
      return admit(
        {
          callerId: r.caller_id,
          target: { kind: 'session', sessionId: r.session_id, taskId: session.taskId },
          deliveryKind: 'queued',
          queueMaxPerSession: max,
          content: r.content,
          planCommentRefs: r.plan_comment_refs ?? [],
          attachmentIds: r.attachment_ids,
          attachmentOwnerId: r.attachment_owner_id,
          model: r.model,
          planMode: r.plan_mode,
        },
        session.taskId,
      );
    },

    admit: (input) => admit({ ...input, deliveryKind: 'queued', queueMaxPerSession: max }, input.target.taskId),

    async list({ session_id }) {
      const listed = await prompts.listQueue(session_id);
      if (!listed.ok) return storeFailure(listed);
      return {
        ok: true,
        entries: listed.entries.map(queueEntryPayload),
        count: listed.entries.length,
        max,
        revision: listed.revision,
        auto_run: listed.autoRun,
      };
    },

    remove: ({ session_id, queue_id }) =>
      withdraw({ sessionId: session_id, queueIds: [queue_id], status: 'removed', reason: '', beforeCommit: withdrawalFailpoint }),
    clear: ({ session_id }) => withdraw({ sessionId: session_id, status: 'removed', reason: '', beforeCommit: withdrawalFailpoint }),

    async update(r) {
      const updated = await prompts.updateQueueEntry({
        sessionId: r.session_id,
        queueId: r.queue_id,
        version: r.version,
        content: r.content,
        model: r.model,
        planMode: r.plan_mode,
        attachmentIds: r.attachment_ids,
        attachmentOwnerId: r.attachment_owner_id,
      });
      if (!updated.ok) return storeFailure(updated);
      const { entry } = updated;
      publishQueueStatus(entry, `updated:${entry.id}:${entry.version}`);
      return { ok: true, entry: queueEntryPayload(entry), released_attachment_ids: updated.releasedAttachmentIds };
    },

    async setAutoRun({ session_id, auto_run }) {
      const set = await prompts.setAutoRun(session_id, auto_run);
      if (!set.ok) return storeFailure(set);
      if (set.changed) {
        // A resume delivers what waited without waiting for the poll.
        if (auto_run) deps.dispatch.kick(session_id);
        publishQueueStatus({ sessionId: session_id, taskId: set.taskId }, `auto_run:${auto_run ? 'on' : 'off'}:${randomUUID()}`);
      }
      return { ok: true, session_id, task_id: set.taskId, auto_run: set.autoRun };
    },

    drain: drainHead,

    async reorder(r) {
      const reordered = await prompts.reorderQueue({
        sessionId: r.session_id,
        queueIds: r.queue_ids,
        revision: r.revision,
        beforeCommit: () => failpoints.reach('before_reorder_commit'),
      });
      if (!reordered.ok) return storeFailure(reordered);
      if (reordered.revision !== r.revision) {
        publishQueueStatus({ sessionId: r.session_id, taskId: reordered.taskId }, `revision:${reordered.revision}`);
      }
      return { ok: true, entries: reordered.entries.map(queueEntryPayload), revision: reordered.revision };
    },
  };

  /** One queued prompt, from the accepting transaction to the reply; a new one kicks, and publishes what changed. */
  async function admit(input: AcceptPromptInput, taskId: string): Promise<EndpointReplyOf<'enqueue'>> {
    let accepted: AcceptPromptResult;
    if ((input.planCommentRefs ?? []).length > 0) {
      const outcome = await promptWrites.mutate(taskId, (store) => store.acceptPrompt(input));
      if (!outcome.ok) return lockTimeoutFailure(outcome, taskId);
      accepted = outcome.value;
    } else {
      accepted = await prompts.acceptPrompt(input);
    }
    if (!accepted.ok) return storeFailure(accepted);
    const reply = admissionPayload(accepted);
    if (!accepted.replayed) {
      // The kick first: delivery need not wait for the events, which are hints for the summary.
      deps.dispatch.kick(accepted.sessionId);
      if (accepted.consumedCommentIds.length > 0 && reply.plan_comments) deps.publishComments(reply.plan_comments);
      deps.queueStatus.issue({ sessionId: accepted.sessionId, taskId: accepted.taskId }, `${accepted.receiptId}:enqueued`);
    }
    return reply;
  }

  async function drainHead({ session_id }: z.output<typeof queueDrainSchema>): Promise<EndpointReplyOf<'drainQueue'>> {
    const session = await targets.session(session_id);
    if (!session) return reasoned('not_found', 'session_not_found', `session ${session_id} does not exist`);
    const result = await deps.dispatch.drain(session_id);
    if ((result.outcome === 'acknowledged' || result.outcome === 'unconfirmed') && result.receiptId)
      return { ok: true, session_id, queue_id: result.receiptId, delivery: result.outcome };
    if (result.outcome === 'nothing' && result.refused && result.refused !== 'stopping' && result.refused !== 'no_dispatcher')
      return reasoned('conflict', result.refused, `session ${session_id} cannot take a prompt now (${result.refused}); nothing was delivered`);
    if (result.outcome === 'nothing' && result.refused === undefined) {
      const listed = await prompts.listQueue(session_id);
      if (listed.ok && listed.entries.length === 0) return reasoned('conflict', 'queue_empty', `session ${session_id} has nothing queued`);
      return reasoned('conflict', 'entry_in_flight', `the head of session ${session_id} is being delivered or waits for its retry`);
    }
    if (result.outcome === 'released')
      return reasoned('conflict', 'session_unavailable', `session ${session_id} stopped taking prompts before the delivery; the entry waits again`);
    // A failed or interrupted pass (or a worker stopping): the entry is where the dispatcher left it; asking again is safe.
    return reasoned(
      'unavailable',
      'drain_failed',
      `the delivery of session ${session_id}'s head did not complete (${result.refused ?? result.outcome}); ask again`,
    );
  }

  /** Every committed change of a queue tells its subscribers, the summary's count included. */
  function publishQueueStatus(session: { sessionId: string; taskId: string }, step: string): void {
    deps.queueStatus.issue(session, step);
  }

  async function withdraw(input: WithdrawInput): Promise<QueueWithdrawalReply> {
    const session = await targets.session(input.sessionId);
    if (!session) return reasoned('not_found', 'session_not_found', `session ${input.sessionId} does not exist`);
    const outcome = await promptWrites.mutate(session.taskId, (store) => store.withdraw(input));
    if (!outcome.ok) return lockTimeoutFailure(outcome, session.taskId);
    const result = outcome.value;
    if (!result.ok) return storeFailure(result);
    const plan = result.snapshot ? snapshotPayload(result.snapshot) : null;
    if (result.withdrawn.length > 0) {
      if (plan) deps.publishComments(plan);
      publishQueueStatus(result, `revision:${result.revision}`);
    }
    return {
      ok: true,
      session_id: result.sessionId,
      task_id: result.taskId,
      removed: result.withdrawn.map((w) => ({ queue_id: w.id, position: w.position })),
      returned_comment_ids: result.returnedCommentIds,
      dropped_comment_ids: result.droppedCommentIds,
      released_attachment_ids: result.withdrawn.flatMap((w) => w.attachmentIds),
      plan_comments: plan,
      revision: result.revision,
      count: result.count,
    };
  }
}
