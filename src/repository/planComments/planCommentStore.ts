import { stageAttachment, type StageAttachmentInput, type StageAttachmentResult } from '../attachments/attachments.js';
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
import { notFound, unavailable, type NotFound, type Unavailable } from './planCommentOutcomes.js';
import type { PlanCommentSnapshot } from './planCommentRows.js';
import { acceptPrompt, type AcceptPromptInput, type AcceptPromptResult } from '../prompts/promptAcceptance.js';
import { detectPlanCommentSchema, type PlanCommentSchema } from '../schema/planCommentTables.js';
import { readPlanCommentSnapshot } from './taskPlans.js';
import { listWaitingQueuedPrompts } from '../prompts/queuedPrompts.js';
import type { PromptReceiptRecord } from './planCommentRows.js';

export type { AcceptedPrompt, AcceptPromptInput, AcceptPromptResult, DeliveryKind, PlanCommentRef, PromptDelivery, PromptTarget } from '../prompts/promptAcceptance.js';
export type { PromptReceiptRecord } from './planCommentRows.js';
export type { CreatePlanCommentInput, CreatePlanCommentResult, DeletePlanCommentInput, DeletePlanCommentResult, DeletePlanResult, UpdatePlanCommentInput, UpdatePlanCommentResult } from './planComments.js';
export type { ImportLegacyResult, LegacyPlanDraft, LegacySkipReason } from './legacyPlanCommentImport.js';
export type { StageAttachmentInput, StageAttachmentResult } from '../attachments/attachments.js';
export type { AttachmentRecord, PlanCommentRecord, PlanCommentSnapshot } from './planCommentRows.js';
export type { BadRequest, BadRequestReason, Conflict, ConflictReason, NotFound, NotFoundReason, StoreFailure, Unavailable } from './planCommentOutcomes.js';
export type { PlanCommentSchema } from '../schema/planCommentTables.js';

export type SnapshotResult = { ok: true; snapshot: PlanCommentSnapshot } | NotFound | Unavailable;

/** A session's waiting queued prompts (queuedPrompts.ts), in queue order. */
export type QueueListResult = { ok: true; taskId: string; entries: PromptReceiptRecord[] } | NotFound | Unavailable;

/**
 * Every read and write of task-owned plan comments and prompt acceptance (ADR 0002), for the
 * plan-comment, send and queue services. Every expected outcome is a value carrying a `code`
 * (the reply code) and a machine-readable `reason`; only a failure of the database rejects.
 *
 * Each operation is one transaction. Created on a context that already is a transaction (the task
 * admission's mutation scope), it runs inside that one instead; `acceptPrompt` then keeps its
 * all-or-nothing rule with a savepoint. The store takes no admission lock itself: the lease is the
 * caller's, and always outermost. Without it every write still fails closed (exact versions, the
 * plan row lock, the task row lock), it only conflicts more often.
 */
export interface PlanCommentStore {
  /** What this database offers; an operation needing a missing table answers `unavailable`, naming it. */
  readonly schema: PlanCommentSchema;
  /** The task's collection, comments in (created_at, id) order. A task without a plan has `planId: null`. */
  getSnapshot(taskId: string): Promise<SnapshotResult>;
  /** Idempotent by comment id through the admissions ledger; a replay after consumption returns `replayed` and `comment: null`. */
  createComment(input: CreatePlanCommentInput): Promise<CreatePlanCommentResult | Unavailable>;
  /** At the given version only; a stale one is `plan_comments_changed` with the current snapshot. */
  updateComment(input: UpdatePlanCommentInput): Promise<UpdatePlanCommentResult | Unavailable>;
  /** At the given version only; an already-absent comment is `deleted: false`. */
  deleteComment(input: DeletePlanCommentInput): Promise<DeletePlanCommentResult | Unavailable>;
  /** Deletes the plan and its collection (`plan.delete`). */
  deletePlan(input: { taskId: string; planId: string }): Promise<DeletePlanResult | Unavailable>;
  /** One-time, idempotent import of browser drafts (also after they were consumed). */
  importLegacy(input: { taskId: string; drafts: readonly LegacyPlanDraft[] }): Promise<ImportLegacyResult | Unavailable>;
  /** Records a staged attachment's metadata, idempotent by id. */
  stageAttachment(input: StageAttachmentInput): Promise<StageAttachmentResult | Unavailable>;
  /** The accepting transaction (promptAcceptance.ts), for both delivery kinds. */
  acceptPrompt(input: AcceptPromptInput): Promise<AcceptPromptResult>;
  /** The session's waiting queued prompts; an unknown session is `session_not_found`. */
  listQueue(sessionId: string): Promise<QueueListResult>;
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
    createComment: (input) => comments(() => createPlanComment(ctx, input)),
    updateComment: (input) => comments(() => updatePlanComment(ctx, input)),
    deleteComment: (input) => comments(() => deletePlanComment(ctx, input)),
    deletePlan: (input) => comments(() => deleteTaskPlan(ctx, input)),
    importLegacy: (input) => comments(() => importLegacyPlanComments(ctx, input)),
    stageAttachment: (input) =>
      schema.missingForAttachments.length > 0 ? Promise.resolve(unavailable('attachments', schema.missingForAttachments)) : stageAttachment(ctx, input),
    acceptPrompt: (input) => acceptPrompt(ctx, schema, input),
    async listQueue(sessionId) {
      if (!schema.receiptTable) return unavailable('the prompt queue', schema.missingForPrompts);
      const session = await ctx.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
      if (!session) return notFound('session_not_found', `session ${sessionId} does not exist`);
      return { ok: true, taskId: String(session.task_id), entries: await listWaitingQueuedPrompts(ctx, schema.receiptTable, sessionId) };
    },
  };
}

/** Reads the catalog, then builds the store: for callers that build it once per database. */
export async function openPlanCommentStore(ctx: RepositoryContext): Promise<PlanCommentStore> {
  return createPlanCommentStore(ctx, await detectPlanCommentSchema(ctx));
}
