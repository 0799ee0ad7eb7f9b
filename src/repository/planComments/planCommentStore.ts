import type { RepositoryContext } from '../context.js';
import { importLegacyPlanComments, type ImportLegacyResult, type LegacyPlanDraft } from './legacyPlanCommentImport.js';
import {
  createPlanComment,
  deletePlanComment,
  deleteTaskPlan,
  updatePlanComment,
  type CreatePlanCommentInput,
  type CreatePlanCommentResult,
  type DeletePlanCommentInput,
  type DeletePlanCommentResult,
  type DeletePlanResult,
  type UpdatePlanCommentInput,
  type UpdatePlanCommentResult,
} from './planComments.js';
import { badRequest, notFound, planOwnedByKandev, unavailable, type BadRequest, type NotFound, type Unavailable } from './planCommentOutcomes.js';
import { isUuid } from './commentIds.js';
import type { PlanCommentSnapshot } from './planCommentRows.js';
import { detectPlanCommentSchema, type PlanCommentSchema } from '../schema/planCommentTables.js';
import { readPlanCommentSnapshot } from './taskPlans.js';

export type { LegacyPlanDraft } from './legacyPlanCommentImport.js';
export type { PlanCommentRecord, PlanCommentSnapshot } from './planCommentRows.js';
export type { StoreFailure } from './planCommentOutcomes.js';
export type { PlanCommentSchema } from '../schema/planCommentTables.js';

type SnapshotResult = { ok: true; snapshot: PlanCommentSnapshot } | NotFound | Unavailable;

/**
 * Every read and write of task-owned plan comments (ADR 0002), for the plan-comment service and the
 * prompt preflight's snapshot read; prompts have their own store (prompts/promptStore.ts). Every
 * expected outcome is a value carrying a `code` (the reply code) and a machine-readable `reason`;
 * only a failure of the database rejects.
 *
 * Each operation is one transaction. Created on a context that already is a transaction (the task
 * admission's mutation scope), it runs inside that one instead. The store takes no admission lock itself: the lease is the
 * caller's, and always outermost. Without it every write still fails closed (exact versions, the
 * plan row lock, the task row lock), it only conflicts more often.
 */
export interface PlanCommentStore {
  /** What this database offers; an operation needing a missing table answers `unavailable`, naming it. */
  readonly schema: PlanCommentSchema;
  /** The task's collection, comments in (created_at, id) order. A task without a plan has `planId: null`. */
  getSnapshot(taskId: string): Promise<SnapshotResult>;
  /** Idempotent by comment id through the admissions ledger; a replay after consumption returns `replayed` and `comment: null`. */
  createComment(input: CreatePlanCommentInput): Promise<CreatePlanCommentResult | BadRequest | Unavailable>;
  /** At the given version only; a stale one is `plan_comments_changed` with the current snapshot. */
  updateComment(input: UpdatePlanCommentInput): Promise<UpdatePlanCommentResult | Unavailable>;
  /** At the given version only; an already-absent comment is `deleted: false`. */
  deleteComment(input: DeletePlanCommentInput): Promise<DeletePlanCommentResult | Unavailable>;
  /**
   * Deletes the plan and its collection (`plan.delete`). Beside Kandev's tables (`kandevOwnsPlans`)
   * it is refused, `plan_owned_by_kandev`, before any statement: the plan is Kandev's to delete.
   */
  deletePlan(input: { taskId: string; planId: string }): Promise<DeletePlanResult | Unavailable>;
  /** One-time, idempotent import of browser drafts (also after they were consumed). */
  importLegacy(input: { taskId: string; drafts: readonly LegacyPlanDraft[] }): Promise<ImportLegacyResult | Unavailable>;
}

/** The store over `ctx`, for a database whose tables `schema` describes (`detectPlanCommentSchema`). */
export function createPlanCommentStore(ctx: RepositoryContext, schema: PlanCommentSchema): PlanCommentStore {
  const comments = <T>(run: () => Promise<T>): Promise<T | Unavailable> =>
    schema.missingForComments.length > 0 ? Promise.resolve(unavailable('plan comments', schema.missingForComments)) : run();
  return {
    schema,
    async getSnapshot(taskId) {
      if (schema.missingForComments.length > 0) return unavailable('plan comments', schema.missingForComments);
      const snapshot = await readPlanCommentSnapshot(ctx, taskId);
      return snapshot ? { ok: true, snapshot } : notFound('task_not_found', `task ${taskId} does not exist`);
    },
    createComment: (input) =>
      comments<CreatePlanCommentResult | BadRequest>(() =>
        schema.kandevOwnsPlans && !isUuid(input.commentId)
          ? Promise.resolve(
              badRequest(
                'invalid_comment_id',
                `comment_id ${JSON.stringify(input.commentId)} is not a UUID: beside Kandev's tables comment ids are UUIDs, as Kandev's comment service requires`,
              ),
            )
          : createPlanComment(ctx, input),
      ),
    updateComment: (input) => comments(() => updatePlanComment(ctx, input)),
    deleteComment: (input) => comments(() => deletePlanComment(ctx, input)),
    deletePlan: (input) =>
      comments(() => (schema.kandevOwnsPlans ? Promise.resolve(planOwnedByKandev(input.taskId, input.planId)) : deleteTaskPlan(ctx, input))),
    importLegacy: (input) => comments(() => importLegacyPlanComments(ctx, input)),
  };
}

/** Reads the catalog, then builds the store: for callers that build it once per database. */
export async function openPlanCommentStore(ctx: RepositoryContext): Promise<PlanCommentStore> {
  return createPlanCommentStore(ctx, await detectPlanCommentSchema(ctx));
}
