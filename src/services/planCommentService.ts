import type { Logger } from 'pino';
import type { z } from 'zod';
import type { AdmissionOutcome, TaskAdmission } from '../repository/admission/taskAdmission.js';
import type { RepositoryContext } from '../repository/context.js';
import type { AcceptPromptResult, PlanCommentSnapshot, PlanCommentStore, PromptTarget, StoreFailure } from '../repository/planCommentStore.js';
import type { AnyReply } from '../contract/replyErrorCodes.js';
import type {
  attachmentStageSchema,
  importLegacySchema,
  messageSendSchema,
  planCommentCreateSchema,
  planCommentDeleteSchema,
  planCommentListSchema,
  planCommentRunSchema,
  planCommentUpdateSchema,
  planDeleteSchema,
  queueEnqueueSchema,
  queueListSchema,
} from '../contract/planCommentRequests.js';
import { createPromptQueue } from './promptQueue.js';
import type { SummaryPorts } from './publishOrRefresh.js';
import type { PromptTargets } from './promptTargets.js';
import { admissionPayload, attachmentPayload, commentPayload, lockTimeoutFailure, reasoned, snapshotPayload, storeFailure } from './planCommentWire.js';
import type { PlanCommentsPayload, ReasonedFailure } from '../contract/planCommentPayloads.js';
import type { Failpoints } from '../failpoints.js';
import type { PromptDispatch } from './promptDispatch.js';
import type { TurnStartHook } from './turnStartHook.js';

/**
 * Task-owned plan comments (ADR 0002) and the two prompts that consume them: `message.send` (to
 * exactly the session named) and `plan_comment.run` (to the task's primary session).
 *
 * - Every collection change runs in `admission.withMutation`, so it waits while a send on the task
 *   holds the lease, and then sees what that send committed.
 * - A send carrying comment refs holds `admission.withLease(task, ..., {callerId})` around its
 *   preflight (replay check, target, archived task, refs against the collection), the turn-start
 *   hook, and the accepting transaction, which re-validates all of it. A send without refs takes no
 *   lease (and so no lock connection): it has no comment context to keep valid.
 * - After every committed change the full collection goes out on `task_plan.comments_updated`,
 *   deduplicated by `task_id:plan_id:revision`. A publish failure is logged once and nothing else:
 *   the database is the truth, and the next change publishes the whole collection again.
 * - The reply does not wait for that publish's acknowledgement: it carries the same snapshot, and
 *   every consumer orders collections by `(plan_id, revision)`, not by arrival. Publishes are
 *   issued in commit order on one connection; `eventsSettled()` waits for those still in flight
 *   (the worker calls it on stop, after the endpoints stopped taking requests).
 */

export type { PromptTargets } from './promptTargets.js';

/** Publishes `task_plan.comments_updated` with the given message id (its JetStream `Nats-Msg-Id`). */
export interface PlanCommentEvents {
  publishComments(payload: PlanCommentsPayload, msgId: string): Promise<void>;
}

export interface PlanCommentServiceDeps {
  ctx: RepositoryContext;
  store: PlanCommentStore;
  /** The store over a mutation's transaction. */
  storeIn(tx: RepositoryContext): PlanCommentStore;
  admission: TaskAdmission;
  hook: TurnStartHook;
  targets: PromptTargets;
  events: PlanCommentEvents;
  /** Kicked after every newly accepted prompt, so this replica delivers it without waiting for a poll. */
  dispatch: PromptDispatch;
  /** Publishes `message.queue.status_changed` after a new queue entry (refreshing the summary when the bus refuses it). */
  queueEvents: SummaryPorts;
  /** QUEUE_MAX_PER_SESSION: the most waiting queued prompts a session may hold. */
  queueMaxPerSession: number;
  /** Test-only boundaries (after_accept_commit); none unless PENDING_PROJECTOR_FAILPOINTS arms them. */
  failpoints?: Failpoints;
  logger: Logger;
}

type Req<S extends z.ZodType> = z.output<S>;

export interface PlanCommentService {
  list(request: Req<typeof planCommentListSchema>): Promise<AnyReply>;
  create(request: Req<typeof planCommentCreateSchema>): Promise<AnyReply>;
  update(request: Req<typeof planCommentUpdateSchema>): Promise<AnyReply>;
  remove(request: Req<typeof planCommentDeleteSchema>): Promise<AnyReply>;
  deletePlan(request: Req<typeof planDeleteSchema>): Promise<AnyReply>;
  importLegacy(request: Req<typeof importLegacySchema>): Promise<AnyReply>;
  stageAttachment(request: Req<typeof attachmentStageSchema>): Promise<AnyReply>;
  send(request: Req<typeof messageSendSchema>): Promise<AnyReply>;
  run(request: Req<typeof planCommentRunSchema>): Promise<AnyReply>;
  /** Resolves once every collection event issued so far was acknowledged or logged as failed. */
  eventsSettled(): Promise<void>;
  /** `queue.enqueue` (promptQueue.ts). */
  enqueue(request: Req<typeof queueEnqueueSchema>): Promise<AnyReply>;
  /** `queue.list` (promptQueue.ts). */
  listQueue(request: Req<typeof queueListSchema>): Promise<AnyReply>;
}

/** The message id of a collection event: one per (task, plan, revision). */
export function commentsMsgId(snapshot: PlanCommentsPayload): string {
  return `${snapshot.task_id}:${snapshot.plan_id ?? ''}:${snapshot.revision}`;
}

const lockTimeout = lockTimeoutFailure;

export function createPlanCommentService(deps: PlanCommentServiceDeps): PlanCommentService {
  const { store, admission, targets } = deps;
  const log = deps.logger.child({ component: 'plan-comments' });

  const inFlight = new Set<Promise<void>>();

  /** Issues the collection event now; the caller replies without waiting for its acknowledgement. */
  function publish(payload: PlanCommentsPayload, msgId = commentsMsgId(payload)): void {
    const published = deps.events.publishComments(payload, msgId).catch((err: unknown) => {
      // Committed already: the database is the truth, and the next change republishes it all.
      log.warn({ err, taskId: payload.task_id, planId: payload.plan_id, revision: payload.revision }, 'task_plan.comments_updated not published; the next change of the collection publishes it whole');
    });
    inFlight.add(published);
    void published.finally(() => inFlight.delete(published));
  }

  /** One collection change under the task's mutation lock; `changed` says whether it committed a change. */
  async function mutate<T extends { ok: true; snapshot: PlanCommentSnapshot } | StoreFailure>(
    taskId: string,
    fn: (s: PlanCommentStore) => Promise<T>,
    reply: (ok: Extract<T, { ok: true }>, plan: PlanCommentsPayload) => { changed: boolean; msgId?: string; body: Record<string, unknown> },
  ): Promise<AnyReply> {
    const outcome: AdmissionOutcome<T> = await admission.withMutation(deps.ctx, taskId, (tx) => fn(deps.storeIn(tx)));
    if (!outcome.ok) return lockTimeout(outcome, taskId);
    const result = outcome.value;
    if (!result.ok) return storeFailure(result as StoreFailure);
    const plan = snapshotPayload(result.snapshot);
    const { changed, msgId, body } = reply(result as Extract<T, { ok: true }>, plan);
    if (changed) publish(plan, msgId);
    return { ok: true, plan_comments: plan, ...body } as AnyReply;
  }

  interface Admit {
    callerId: string;
    taskId: string;
    refs: ReadonlyArray<{ id: string; version: number }>;
    content: string;
    attachmentIds?: string[];
    attachmentOwnerId?: string;
    /** Resolves the target session for the preflight; a failure reply ends the send. */
    resolve(): Promise<{ sessionId: string; state: string; promptable: boolean } | ReasonedFailure>;
    target(preflightSessionId?: string): PromptTarget;
  }

  /** Preflight, hook, accept: run under the lease when the send carries refs. */
  async function admit(a: Admit): Promise<AnyReply> {
    let accepted: AcceptPromptResult;
    const acceptInput = (target: PromptTarget, expectedSessionState?: string) => ({
      callerId: a.callerId,
      target,
      content: a.content,
      planCommentRefs: a.refs,
      attachmentIds: a.attachmentIds,
      attachmentOwnerId: a.attachmentOwnerId,
      expectedSessionState,
    });
    if (await targets.callerIdUsed(a.callerId)) {
      // A resend: the accepting transaction compares it with what was accepted (replayed or caller_id_conflict).
      accepted = await store.acceptPrompt(acceptInput(a.target()));
    } else {
      const resolved = await a.resolve();
      if ('ok' in resolved) return resolved;
      if (!resolved.promptable) {
        return reasoned('conflict', 'session_unavailable', `session ${resolved.sessionId} is ${resolved.state}`, { state: resolved.state });
      }
      if (a.refs.length > 0) {
        const snap = await store.getSnapshot(a.taskId);
        if (!snap.ok) return storeFailure(snap);
        const byId = new Map(snap.snapshot.comments.map((c) => [c.id, c.version]));
        const stale = a.refs.filter((r) => byId.get(r.id) !== r.version);
        if (stale.length > 0) {
          return reasoned('conflict', 'plan_comments_changed', `plan comments ${stale.map((r) => r.id).join(', ')} are gone or at another version`, {
            plan_comments: snapshotPayload(snap.snapshot),
          });
        }
      }
      const hook = await deps.hook.beforePrompt({ task_id: a.taskId, session_id: resolved.sessionId, caller_id: a.callerId, delivery_kind: 'direct' });
      if (!hook.ok) {
        return reasoned('unavailable', 'turn_start_hook_failed', `the turn-start hook failed (${hook.reason}): ${hook.detail}; nothing was written`, { hook_reason: hook.reason });
      }
      accepted = await store.acceptPrompt(acceptInput(a.target(resolved.sessionId), resolved.state));
    }
    if (!accepted.ok) return storeFailure(accepted);
    const reply = admissionPayload(accepted);
    if (!accepted.replayed && accepted.consumedCommentIds.length > 0 && reply.plan_comments) publish(reply.plan_comments);
    if (!accepted.replayed) {
      await deps.failpoints?.reach('after_accept_commit');
      deps.dispatch.kick(accepted.sessionId);
    }
    return reply as unknown as AnyReply;
  }

  async function leased(a: Admit): Promise<AnyReply> {
    if (a.refs.length === 0) return admit(a);
    const outcome = await admission.withLease(a.taskId, () => admit(a), { callerId: a.callerId });
    return outcome.ok ? outcome.value : lockTimeout(outcome, a.taskId);
  }

  const notFound = (reason: string, message: string) => reasoned('not_found', reason, message);
  const queue = createPromptQueue({ ...deps, publishComments: publish });

  return {
    async eventsSettled() {
      while (inFlight.size > 0) await Promise.all(inFlight);
    },

    enqueue: queue.enqueue,
    listQueue: queue.list,
    async list({ task_id }) {
      const snap = await store.getSnapshot(task_id);
      return snap.ok ? { ok: true, plan_comments: snapshotPayload(snap.snapshot) } as AnyReply : storeFailure(snap);
    },

    create: (r) =>
      mutate(
        r.task_id,
        (s) =>
          s.createComment({
            taskId: r.task_id,
            planId: r.plan_id,
            commentId: r.comment_id,
            body: r.body,
            selectedText: r.selected_text,
            anchorFrom: r.anchor_from,
            anchorTo: r.anchor_to,
          }),
        (ok) => ({ changed: !ok.replayed, body: { replayed: ok.replayed, comment: ok.comment ? commentPayload(ok.comment) : null } }),
      ),

    update: (r) =>
      mutate(
        r.task_id,
        (s) => s.updateComment({ taskId: r.task_id, planId: r.plan_id, commentId: r.comment_id, version: r.version, body: r.body }),
        (ok) => ({ changed: true, body: { comment: commentPayload(ok.comment) } }),
      ),

    remove: (r) =>
      mutate(
        r.task_id,
        (s) => s.deleteComment({ taskId: r.task_id, planId: r.plan_id, commentId: r.comment_id, version: r.version }),
        (ok) => ({ changed: ok.deleted, body: { deleted: ok.deleted } }),
      ),

    deletePlan: (r) =>
      mutate(
        r.task_id,
        (s) => s.deletePlan({ taskId: r.task_id, planId: r.plan_id }),
        // The collection after it has no plan (revision 0): the id names the deleted plan instead.
        (ok) => ({ changed: ok.deleted, msgId: `${r.task_id}:${r.plan_id}:deleted`, body: { deleted: ok.deleted } }),
      ),

    importLegacy: (r) =>
      mutate(
        r.task_id,
        (s) => s.importLegacy({ taskId: r.task_id, drafts: r.drafts }),
        (ok) => ({ changed: ok.imported.length > 0, body: { imported: ok.imported, skipped: ok.skipped } }),
      ),

    async stageAttachment(r) {
      const staged = await store.stageAttachment({
        id: r.id,
        ownerId: r.owner_id,
        workspaceId: r.workspace_id,
        taskId: r.task_id,
        sessionId: r.session_id,
        name: r.name,
        mimeType: r.mime_type,
        sizeBytes: r.size_bytes,
        storageKey: r.storage_key,
        kind: r.kind,
        deliveryMode: r.delivery_mode,
        ttlMs: r.ttl_ms,
      });
      if (!staged.ok) return storeFailure(staged);
      return { ok: true, replayed: staged.replayed, attachment: attachmentPayload(staged.attachment) } as AnyReply;
    },

    async send(r) {
      const session = await targets.session(r.session_id);
      if (!session) return notFound('session_not_found', `session ${r.session_id} does not exist`);
      return leased({
        callerId: r.caller_id,
        taskId: session.taskId,
        refs: r.plan_comment_refs ?? [],
        content: r.content,
        attachmentIds: r.attachment_ids,
        attachmentOwnerId: r.attachment_owner_id,
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
      return leased({
        callerId: r.caller_id,
        taskId: r.task_id,
        refs: r.plan_comment_refs,
        content: r.content,
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
