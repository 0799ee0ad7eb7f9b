import type { z } from 'zod';
import type { EndpointReplyOf } from '../../contract/endpoints.js';
import type { PlanCommentsReply } from '../../contract/planCommentReplies.js';
import type { AdmissionOutcome } from '../../repository/admission/taskAdmission.js';
import type { AdmittedWrites } from '../admittedWrites.js';
import type { PlanCommentSnapshot, PlanCommentStore, StoreFailure } from '../../repository/planComments/planCommentStore.js';
import type {
  importLegacySchema,
  planCommentCreateSchema,
  planCommentDeleteSchema,
  planCommentListSchema,
  planCommentUpdateSchema,
  planDeleteSchema,
} from '../../contract/planCommentRequests.js';
import { commentPayload, lockTimeoutFailure, snapshotPayload, storeFailure, taskPlanPayload } from '../planCommentWire.js';
import type { PlanCommentsPayload } from '../../contract/planCommentPayloads.js';
import type { PlanCommentPublisher } from './planCommentEvents.js';

/**
 * Task-owned plan comments (ADR 0002): the collection's endpoints (list, create, update, delete,
 * `plan.delete`, legacy import). Every change runs in one admitted write (`AdmittedWrites`), so it waits while a
 * send on the task holds the lease, and then sees what that send committed; after every committed
 * change the full collection goes out on `task_plan.comments.changed`, deduplicated by
 * `task_id:plan_id:revision` (planCommentEvents.ts); a deleted plan also goes out as Kandev's
 * `task_plan.deleted`. Beside Kandev's tables `plan.delete` is refused (`plan_owned_by_kandev`).
 */

export type { PlanCommentEvents } from './planCommentEvents.js';

export interface PlanCommentServiceDeps {
  store: PlanCommentStore;
  /** The store's writes, each in one transaction under the task's admission lock. */
  writes: AdmittedWrites<PlanCommentStore>;
  comments: PlanCommentPublisher;
}

type Req<S extends z.ZodType> = z.output<S>;

export interface PlanCommentService {
  list(request: Req<typeof planCommentListSchema>): Promise<EndpointReplyOf<'listPlanComments'>>;
  create(request: Req<typeof planCommentCreateSchema>): Promise<EndpointReplyOf<'createPlanComment'>>;
  update(request: Req<typeof planCommentUpdateSchema>): Promise<EndpointReplyOf<'updatePlanComment'>>;
  remove(request: Req<typeof planCommentDeleteSchema>): Promise<EndpointReplyOf<'deletePlanComment'>>;
  deletePlan(request: Req<typeof planDeleteSchema>): Promise<EndpointReplyOf<'deletePlan'>>;
  importLegacy(request: Req<typeof importLegacySchema>): Promise<EndpointReplyOf<'importLegacyPlanComments'>>;
}

/** What a committed change replies beside the collection, and whether it publishes it. */
type ChangeReply<B extends object> = { changed: boolean; msgId?: string; body: B; after?: () => void };

/** One collection change under the task's mutation lock, then its event when it changed something. */
function createMutation(deps: PlanCommentServiceDeps) {
  return async function mutate<T extends { ok: true; snapshot: PlanCommentSnapshot } | StoreFailure, B extends object>(
    taskId: string,
    fn: (s: PlanCommentStore) => Promise<T>,
    reply: (ok: Extract<T, { ok: true }>, plan: PlanCommentsPayload) => ChangeReply<B>,
  ): Promise<PlanCommentsReply<B>> {
    const outcome: AdmissionOutcome<T> = await deps.writes.mutate(taskId, fn);
    if (!outcome.ok) return lockTimeoutFailure(outcome, taskId);
    const result = outcome.value;
    if (!result.ok) return storeFailure(result as StoreFailure);
    const plan = snapshotPayload(result.snapshot);
    const { changed, msgId, body, after } = reply(result as Extract<T, { ok: true }>, plan);
    if (changed) deps.comments.publish(plan, msgId);
    after?.();
    return { ok: true, plan_comments: plan, ...body };
  };
}

export function createPlanCommentService(deps: PlanCommentServiceDeps): PlanCommentService {
  const mutate = createMutation(deps);
  return {
    async list({ task_id }) {
      const snap = await deps.store.getSnapshot(task_id);
      return snap.ok ? { ok: true, plan_comments: snapshotPayload(snap.snapshot) } : storeFailure(snap);
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
        // Then Kandev's task_plan.deleted with the plan as it was (beside Kandev the store refuses).
        (ok) => ({
          changed: ok.deleted,
          msgId: `${r.task_id}:${r.plan_id}:deleted`,
          body: { deleted: ok.deleted },
          after: () => {
            if (ok.plan) deps.comments.planDeleted(taskPlanPayload(ok.plan));
          },
        }),
      ),

    importLegacy: (r) =>
      mutate(
        r.task_id,
        (s) => s.importLegacy({ taskId: r.task_id, drafts: r.drafts }),
        (ok) => ({ changed: ok.imported.length > 0, body: { imported: ok.imported, skipped: ok.skipped } }),
      ),
  };
}
