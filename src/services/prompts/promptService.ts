import type { Logger } from 'pino';
import type { EndpointReplyOf } from '../../contract/endpoints.js';
import type { PromptReply } from '../../contract/planCommentReplies.js';
import type { z } from 'zod';
import type { TaskAdmission } from '../../repository/admission/taskAdmission.js';
import type { AdmittedWrites } from '../admittedWrites.js';
import type { PlanCommentStore } from '../../repository/planComments/planCommentStore.js';
import type { AcceptPromptInput, AcceptPromptResult, PromptStore, PromptTarget } from '../../repository/prompts/promptStore.js';
import type { Failpoints } from '../../failpoints.js';
import type {
  messageSendSchema,
  planCommentRunSchema,
  queueClearSchema,
  queueDrainSchema,
  queueEnqueueSchema,
  queueListSchema,
  queueRemoveSchema,
  queueReorderSchema,
  queueSetAutoRunSchema,
  queueUpdateSchema,
} from '../../contract/planCommentRequests.js';
import { admissionPayload, lockTimeoutFailure, reasoned, snapshotPayload, storeFailure } from '../planCommentWire.js';
import type { ReasonedFailure } from '../../contract/planCommentPayloads.js';
import type { PlanCommentPublisher } from '../planComments/planCommentEvents.js';
import type { PromptDispatch } from './promptDispatch.js';
import type { QueueStatusEvents } from './queueStatusEvents.js';
import { createPromptQueue } from './promptQueue.js';
import type { PromptTargets } from './promptTargets.js';
import type { TurnStartHook } from './turnStartHook.js';
import { sessionStateRule } from '../../turns/sessionStates.js';

/**
 * The prompt endpoints: `message.send` (to exactly the session named), `plan_comment.run` (to the
 * task's primary session), `queue.enqueue` and `queue.list` (promptQueue.ts).
 *
 * A send carrying comment refs holds `admission.withLease(task, ..., {callerId})` around its
 * preflight (replay check, target, archived task, refs against the collection), the turn-start hook,
 * and the accepting transaction, which re-validates all of it. A send without refs takes no lease
 * (and so no lock connection): it has no comment context to keep valid. A prompt that consumed
 * comments publishes the collection (planCommentEvents.ts); a newly accepted one kicks the
 * dispatcher.
 */

export type { PromptTargets } from './promptTargets.js';

export interface PromptServiceDeps {
  prompts: PromptStore;
  /** The prompt store's writes under the task's admission lock (a queued prompt carrying refs). */
  promptWrites: AdmittedWrites<PromptStore>;
  /** The collection read of the preflight's refs check. */
  comments: PlanCommentStore;
  commentEvents: PlanCommentPublisher;
  admission: TaskAdmission;
  hook: TurnStartHook;
  targets: PromptTargets;
  /** Kicked after every newly accepted prompt, so this replica delivers it without waiting for a poll. */
  dispatch: PromptDispatch;
  /** `message.queue.status_changed` after every change of a queue, issued after the reply. */
  queueStatus: QueueStatusEvents;
  /** QUEUE_MAX_PER_SESSION: the most waiting queued prompts a session may hold. */
  queueMaxPerSession: number;
  /** Test-only boundaries (after_accept_commit, and the queue edits' before_withdrawal_commit and before_reorder_commit); none unless a crash test's worker entry passes armed ones. */
  failpoints?: Failpoints;
  logger: Logger;
}

type Req<S extends z.ZodType> = z.output<S>;

export interface PromptService {
  send(request: Req<typeof messageSendSchema>): Promise<EndpointReplyOf<'sendMessage'>>;
  run(request: Req<typeof planCommentRunSchema>): Promise<EndpointReplyOf<'runPlanComments'>>;
  /** `queue.enqueue` (promptQueue.ts). */
  enqueue(request: Req<typeof queueEnqueueSchema>): Promise<EndpointReplyOf<'enqueue'>>;
  /** `queue.list` (promptQueue.ts). */
  listQueue(request: Req<typeof queueListSchema>): Promise<EndpointReplyOf<'listQueue'>>;
  /** `queue.remove` (promptQueue.ts). */
  removeQueueEntry(request: Req<typeof queueRemoveSchema>): Promise<EndpointReplyOf<'removeQueueEntry'>>;
  /** `queue.clear` (promptQueue.ts). */
  clearQueue(request: Req<typeof queueClearSchema>): Promise<EndpointReplyOf<'clearQueue'>>;
  /** `queue.update` (promptQueue.ts). */
  updateQueueEntry(request: Req<typeof queueUpdateSchema>): Promise<EndpointReplyOf<'updateQueueEntry'>>;
  /** `queue.reorder` (promptQueue.ts). */
  reorderQueue(request: Req<typeof queueReorderSchema>): Promise<EndpointReplyOf<'reorderQueue'>>;
  /** `queue.set_auto_run` (promptQueue.ts). */
  setQueueAutoRun(request: Req<typeof queueSetAutoRunSchema>): Promise<EndpointReplyOf<'setQueueAutoRun'>>;
  /** `queue.drain` (promptQueue.ts). */
  drainQueue(request: Req<typeof queueDrainSchema>): Promise<EndpointReplyOf<'drainQueue'>>;
}

/** The session a direct prompt goes to, as the preflight resolved it. */
type ResolvedTarget = { sessionId: string; state: string; promptable: boolean };

/** One direct prompt: `message.send` and `plan_comment.run` differ only in how they find the session. */
interface DirectPrompt {
  callerId: string;
  taskId: string;
  refs: ReadonlyArray<{ id: string; version: number }>;
  content: string;
  attachmentIds?: string[];
  attachmentOwnerId?: string;
  model?: string;
  planMode?: boolean;
  /** Resolves the target session for the preflight; a failure reply ends the send. */
  resolve(): Promise<ResolvedTarget | ReasonedFailure>;
  target(preflightSessionId?: string): PromptTarget;
}

const notFound = (reason: string, message: string) => reasoned('not_found', reason, message);

function acceptInput(p: DirectPrompt, target: PromptTarget, expectedSessionState?: string): AcceptPromptInput {
  return {
    callerId: p.callerId,
    target,
    content: p.content,
    planCommentRefs: p.refs,
    attachmentIds: p.attachmentIds,
    attachmentOwnerId: p.attachmentOwnerId,
    model: p.model,
    planMode: p.planMode,
    expectedSessionState,
  };
}

/** The checks before a new direct prompt's transaction, in order: the target, its state, the refs, the hook. */
function createPreflight(deps: PromptServiceDeps) {
  async function staleRefs(p: DirectPrompt): Promise<PromptReply | undefined> {
    if (p.refs.length === 0) return undefined;
    const snap = await deps.comments.getSnapshot(p.taskId);
    if (!snap.ok) return storeFailure(snap);
    const byId = new Map(snap.snapshot.comments.map((c) => [c.id, c.version]));
    const stale = p.refs.filter((r) => byId.get(r.id) !== r.version);
    if (stale.length === 0) return undefined;
    return reasoned('conflict', 'plan_comments_changed', `plan comments ${stale.map((r) => r.id).join(', ')} are gone or at another version`, {
      plan_comments: snapshotPayload(snap.snapshot),
    });
  }

  return async function preflight(p: DirectPrompt): Promise<ResolvedTarget | PromptReply> {
    const resolved = await p.resolve();
    if ('ok' in resolved) return resolved;
    if (!resolved.promptable) {
      return reasoned('conflict', 'session_unavailable', `session ${resolved.sessionId} is ${resolved.state}`, { state: resolved.state });
    }
    const stale = await staleRefs(p);
    if (stale) return stale;
    const hook = await deps.hook.beforePrompt({ task_id: p.taskId, session_id: resolved.sessionId, caller_id: p.callerId, delivery_kind: 'direct' });
    if (!hook.ok) {
      return reasoned('unavailable', 'turn_start_hook_failed', `the turn-start hook failed (${hook.reason}): ${hook.detail}; nothing was written`, {
        hook_reason: hook.reason,
      });
    }
    return resolved;
  };
}

/** A direct prompt from its replay check to the reply: preflight, hook, accept, then publish and kick. */
function createDirectPrompts(deps: PromptServiceDeps) {
  const preflight = createPreflight(deps);

  /** A resend goes straight to the accepting transaction, which compares it with what was accepted (replayed or caller_id_conflict). */
  async function accept(p: DirectPrompt): Promise<{ accepted: AcceptPromptResult } | { refused: PromptReply }> {
    if (await deps.targets.callerIdUsed(p.callerId)) return { accepted: await deps.prompts.acceptPrompt(acceptInput(p, p.target())) };
    const resolved = await preflight(p);
    if ('ok' in resolved) return { refused: resolved };
    return { accepted: await deps.prompts.acceptPrompt(acceptInput(p, p.target(resolved.sessionId), resolved.state)) };
  }

  async function afterAccept(accepted: AcceptPromptResult): Promise<PromptReply> {
    if (!accepted.ok) return storeFailure(accepted);
    const reply = admissionPayload(accepted);
    if (!accepted.replayed && accepted.consumedCommentIds.length > 0 && reply.plan_comments) deps.commentEvents.publish(reply.plan_comments);
    if (!accepted.replayed) {
      await deps.failpoints?.reach('after_accept_commit');
      deps.dispatch.kick(accepted.sessionId);
    }
    return reply;
  }

  async function admit(p: DirectPrompt): Promise<PromptReply> {
    const outcome = await accept(p);
    return 'refused' in outcome ? outcome.refused : afterAccept(outcome.accepted);
  }

  /** Under the task's lease when the prompt carries refs; without refs there is nothing to keep valid. */
  return async function directPrompt(p: DirectPrompt): Promise<PromptReply> {
    if (p.refs.length === 0) return admit(p);
    const outcome = await deps.admission.withLease(p.taskId, () => admit(p), { callerId: p.callerId });
    return outcome.ok ? outcome.value : lockTimeoutFailure(outcome, p.taskId);
  };
}

export function createPromptService(deps: PromptServiceDeps): PromptService {
  const { targets } = deps;
  const directPrompt = createDirectPrompts(deps);
  const queue = createPromptQueue({ ...deps, publishComments: (plan) => deps.commentEvents.publish(plan) });

  return {
    enqueue: queue.enqueue,
    listQueue: queue.list,
    removeQueueEntry: queue.remove,
    clearQueue: queue.clear,
    updateQueueEntry: queue.update,
    reorderQueue: queue.reorder,
    setQueueAutoRun: queue.setAutoRun,
    drainQueue: queue.drain,

    async send(r) {
      const session = await targets.session(r.session_id);
      if (!session) return notFound('session_not_found', `session ${r.session_id} does not exist`);
      return directPrompt({
        callerId: r.caller_id,
        taskId: session.taskId,
        refs: r.plan_comment_refs ?? [],
        content: r.content,
        attachmentIds: r.attachment_ids,
        attachmentOwnerId: r.attachment_owner_id,
        model: r.model,
        planMode: r.plan_mode,
        async resolve() {
          const archived = await targets.archived(session.taskId);
          if (archived === undefined) return notFound('task_not_found', `task ${session.taskId} does not exist`);
          if (archived) return reasoned('conflict', 'task_inactive', `task ${session.taskId} is archived`);
          const now = await targets.session(r.session_id);
          if (!now) return notFound('session_not_found', `session ${r.session_id} does not exist`);
          return { sessionId: r.session_id, state: now.state, promptable: now.promptable };
        },
        target: () => ({ kind: 'session', sessionId: r.session_id, taskId: session.taskId }),
      });
    },

    async run(r) {
      const planMode = r.plan_mode ?? true;
      // A busy primary: a queued entry guarded to it. A resend is answered from what was accepted,
      // whichever way it went; an idle primary, or none, is the direct path and its refusals.
      if (!(await targets.callerIdUsed(r.caller_id))) {
        const task = await targets.task(r.task_id);
        const primary = task && !task.archived ? task.primary : null;
        if (primary && !primary.promptable && sessionStateRule(primary.state).active) {
          return queue.admit({
            callerId: r.caller_id,
            target: { kind: 'primary', taskId: r.task_id, expectedSessionId: primary.sessionId },
            content: r.content,
            planCommentRefs: r.plan_comment_refs,
            model: r.model,
            planMode,
          });
        }
      }
      return directPrompt({
        callerId: r.caller_id,
        taskId: r.task_id,
        refs: r.plan_comment_refs,
        content: r.content,
        model: r.model,
        planMode,
        async resolve() {
          const task = await targets.task(r.task_id);
          if (!task) return notFound('task_not_found', `task ${r.task_id} does not exist`);
          if (task.archived) return reasoned('conflict', 'task_inactive', `task ${r.task_id} is archived`);
          if (!task.primary) return notFound('primary_session_not_found', `task ${r.task_id} has no primary session`);
          return task.primary;
        },
        target: (expectedSessionId) => ({ kind: 'primary', taskId: r.task_id, expectedSessionId }),
      });
    },
  };
}
