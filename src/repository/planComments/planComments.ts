import { rawRows, beginOrJoin, type RepositoryContext } from '../context.js';
import { commentsChanged, notFound, type Conflict, type NotFound, type PlanCommentsFull } from './planCommentOutcomes.js';
import { toPlanCommentRecord, writtenNow, type PlanCommentRecord, type PlanCommentSnapshot, type TaskPlanRecord } from './planCommentRows.js';
import { planCommentCreateFingerprint } from '../requestFingerprint.js';
import { bumpCommentsRevision, lockTaskPlan, readPlanCommentSnapshot, taskExists } from './taskPlans.js';
import { normalizeLineEndings, PLAN_COMMENT_LIMITS, planCommentTextBytes } from '../../turns/planCommentPrompt.js';

/**
 * The collection's own writes: create, update, delete, and plan.delete. Each is one transaction (or
 * joins the caller's: the admission's mutation wraps it), takes the plan row lock first, and ends
 * with the revision bump when it changed the collection. Nothing here deletes a comment except an
 * explicit delete and plan.delete (consumption is promptAcceptance.ts's).
 */

type Row = Record<string, unknown>;

export interface CreatePlanCommentInput {
  taskId: string;
  planId: string;
  /** The client's id for the comment: the create is idempotent by it. */
  commentId: string;
  body: string;
  selectedText?: string;
  anchorFrom?: number | null;
  anchorTo?: number | null;
}

export type CreatePlanCommentResult =
  /** `comment` is null on a replay after the comment was consumed or deleted: it is never brought back. */
  | { ok: true; replayed: boolean; comment: PlanCommentRecord | null; snapshot: PlanCommentSnapshot }
  | NotFound
  | Extract<Conflict, { reason: 'comment_id_conflict' | 'plan_comments_full' }>;

export interface UpdatePlanCommentInput {
  taskId: string;
  planId: string;
  commentId: string;
  /** The version the client edited; the update lands only on it and moves the comment to version + 1. */
  version: number;
  body: string;
}

export type UpdatePlanCommentResult =
  | { ok: true; comment: PlanCommentRecord; snapshot: PlanCommentSnapshot }
  | NotFound
  | Extract<Conflict, { reason: 'plan_comments_changed' }>
  /** The new body would take the collection's text past PLAN_COMMENT_LIMITS.planTextMaxBytes. */
  | PlanCommentsFull;

export interface DeletePlanCommentInput {
  taskId: string;
  planId: string;
  commentId: string;
  version: number;
}

export type DeletePlanCommentResult =
  /** `deleted: false`: the comment was already gone (idempotent). */
  { ok: true; deleted: boolean; snapshot: PlanCommentSnapshot } | NotFound | Extract<Conflict, { reason: 'plan_comments_changed' }>;

export type DeletePlanResult =
  /**
   * `deleted: false` (and `plan: null`): the task has no plan of that id (already deleted). `plan` is
   * the deleted row as it was; `snapshot` is the task's collection afterwards.
   */
  | { ok: true; deleted: boolean; plan: TaskPlanRecord | null; snapshot: PlanCommentSnapshot }
  | NotFound
  /** Only the store answers it (beside Kandev's tables); deleteTaskPlan itself always deletes. */
  | Extract<Conflict, { reason: 'plan_owned_by_kandev' }>;

/** The task's plan under lock, or why there is none to write (task or plan not found). */
export async function lockedPlanOf(tx: RepositoryContext, taskId: string, planId: string | undefined): Promise<TaskPlanRecord | NotFound> {
  const plan = await lockTaskPlan(tx, taskId);
  if (plan && (planId === undefined || plan.id === planId)) return plan;
  if (!(await taskExists(tx, taskId))) return notFound('task_not_found', `task ${taskId} does not exist`);
  return notFound('plan_not_found', planId === undefined ? `task ${taskId} has no plan` : `plan ${planId} is not the plan of task ${taskId}`);
}

export async function snapshotIn(tx: RepositoryContext, taskId: string): Promise<PlanCommentSnapshot> {
  return (await readPlanCommentSnapshot(tx, taskId)) ?? { taskId, planId: null, revision: 0, comments: [] };
}

/** The plan's pending comments: how many, and the UTF-8 bytes of their bodies and selected texts (planCommentTextBytes, in SQL). */
export async function collectionSize(tx: RepositoryContext, plan: TaskPlanRecord, exceptCommentId?: string): Promise<{ count: number; textBytes: number }> {
  const bytes = `${tx.dialect.utf8Bytes('body')} + ${tx.dialect.utf8Bytes('selected_text')}`;
  const rows = await rawRows<{ n: number | string; bytes: number | string | null }>(
    tx,
    `SELECT COUNT(*) AS n, SUM(${bytes}) AS bytes FROM task_plan_comments WHERE task_id = ? AND plan_id = ?${exceptCommentId === undefined ? '' : ' AND id <> ?'}`,
    exceptCommentId === undefined ? [plan.taskId, plan.id] : [plan.taskId, plan.id, exceptCommentId],
  );
  return { count: Number(rows[0]?.n ?? 0), textBytes: Number(rows[0]?.bytes ?? 0) };
}

/**
 * The refusal when the collection would hold more than Kandev's limits after the change: more than
 * `commentsPerPlan` comments, or more than `planTextMaxBytes` of bodies and selected texts.
 */
export async function collectionFull(
  tx: RepositoryContext,
  plan: TaskPlanRecord,
  after: { count: number; textBytes: number },
  what: string,
): Promise<PlanCommentsFull | undefined> {
  const { commentsPerPlan, planTextMaxBytes } = PLAN_COMMENT_LIMITS;
  let message: string | undefined;
  if (after.count > commentsPerPlan) message = `${what} would exceed ${commentsPerPlan} pending comments`;
  else if (after.textBytes > planTextMaxBytes)
    message = `${what} would make the plan's pending comments hold ${after.textBytes} bytes of body and selected text (at most ${planTextMaxBytes})`;
  if (message === undefined) return undefined;
  return { ok: false, code: 'conflict', reason: 'plan_comments_full', message, limit: commentsPerPlan, snapshot: await snapshotIn(tx, plan.taskId) };
}

function isNotFound(value: TaskPlanRecord | NotFound): value is NotFound {
  return 'ok' in value;
}

export function createPlanComment(ctx: RepositoryContext, input: CreatePlanCommentInput): Promise<CreatePlanCommentResult> {
  const body = normalizeLineEndings(input.body);
  const selectedText = normalizeLineEndings(input.selectedText ?? '');
  const anchorFrom = input.anchorFrom ?? null;
  const anchorTo = input.anchorTo ?? null;
  const fingerprint = planCommentCreateFingerprint({ taskId: input.taskId, planId: input.planId, body, selectedText, anchorFrom, anchorTo });
  return beginOrJoin(ctx, async (tx): Promise<CreatePlanCommentResult> => {
    // The lock first, so two creates of one id queue, and the second finds the first's admission.
    const plan = await lockTaskPlan(tx, input.taskId);
    const admission = await tx.knex('task_plan_comment_admissions').where({ id: input.commentId }).first();
    if (admission) {
      // Checked before the plan: a create replayed after plan.delete is still a replay.
      if (String(admission.request_fingerprint) !== fingerprint) {
        return { ok: false, code: 'conflict', reason: 'comment_id_conflict', message: `comment id ${input.commentId} was admitted for another request` };
      }
      const row = await tx.knex('task_plan_comments').where({ id: input.commentId, task_id: input.taskId, plan_id: input.planId }).first();
      return { ok: true, replayed: true, comment: row ? toPlanCommentRecord(row) : null, snapshot: await snapshotIn(tx, input.taskId) };
    }
    const target = plan && plan.id === input.planId ? plan : await lockedPlanOf(tx, input.taskId, input.planId);
    if (isNotFound(target)) return target;
    // A comment row without an admission (written by another producer) keeps its id.
    if (await tx.knex('task_plan_comments').where({ id: input.commentId }).first()) {
      return { ok: false, code: 'conflict', reason: 'comment_id_conflict', message: `comment id ${input.commentId} is taken` };
    }
    const size = await collectionSize(tx, target);
    const adding = planCommentTextBytes({ body, selected_text: selectedText });
    const full = await collectionFull(tx, target, { count: size.count + 1, textBytes: size.textBytes + adding }, 'the comment');
    if (full) return full;
    const now = writtenNow(tx);
    const row = {
      id: input.commentId,
      task_id: input.taskId,
      plan_id: target.id,
      body,
      selected_text: selectedText,
      anchor_from: anchorFrom,
      anchor_to: anchorTo,
      version: 1,
      created_at: now,
      updated_at: now,
    };
    await tx.knex('task_plan_comments').insert(row);
    await tx
      .knex('task_plan_comment_admissions')
      .insert({ id: input.commentId, task_id: input.taskId, plan_id: target.id, request_fingerprint: fingerprint, created_at: now });
    await bumpCommentsRevision(tx, target);
    return { ok: true, replayed: false, comment: toPlanCommentRecord(row), snapshot: await snapshotIn(tx, input.taskId) };
  });
}

export function updatePlanComment(ctx: RepositoryContext, input: UpdatePlanCommentInput): Promise<UpdatePlanCommentResult> {
  const body = normalizeLineEndings(input.body);
  return beginOrJoin(ctx, async (tx): Promise<UpdatePlanCommentResult> => {
    const plan = await lockedPlanOf(tx, input.taskId, input.planId);
    if (isNotFound(plan)) return plan;
    const current = await tx.knex('task_plan_comments').select('selected_text').where({ id: input.commentId, task_id: input.taskId, plan_id: plan.id }).first();
    if (current) {
      const others = await collectionSize(tx, plan, input.commentId);
      const edited = planCommentTextBytes({ body, selected_text: String(current.selected_text ?? '') });
      const full = await collectionFull(tx, plan, { count: others.count + 1, textBytes: others.textBytes + edited }, 'the edit');
      if (full) return full;
    }
    const updated = await rawRows<Row>(
      tx,
      `UPDATE task_plan_comments SET body = ?, version = version + 1, updated_at = ?
        WHERE id = ? AND task_id = ? AND plan_id = ? AND version = ? RETURNING *`,
      [body, writtenNow(tx), input.commentId, input.taskId, plan.id, input.version],
    );
    if (updated.length === 0) {
      return commentsChanged(await snapshotIn(tx, input.taskId), `comment ${input.commentId} is not at version ${input.version} (consumed, deleted or edited)`);
    }
    await bumpCommentsRevision(tx, plan);
    return { ok: true, comment: toPlanCommentRecord(updated[0]!), snapshot: await snapshotIn(tx, input.taskId) };
  });
}

export function deletePlanComment(ctx: RepositoryContext, input: DeletePlanCommentInput): Promise<DeletePlanCommentResult> {
  return beginOrJoin(ctx, async (tx): Promise<DeletePlanCommentResult> => {
    const plan = await lockedPlanOf(tx, input.taskId, input.planId);
    if (isNotFound(plan)) return plan;
    const deleted = await tx.knex('task_plan_comments').where({ id: input.commentId, task_id: input.taskId, plan_id: plan.id, version: input.version }).del();
    if (deleted === 0) {
      const still = await tx.knex('task_plan_comments').where({ id: input.commentId, task_id: input.taskId, plan_id: plan.id }).first();
      if (still)
        return commentsChanged(await snapshotIn(tx, input.taskId), `comment ${input.commentId} is at version ${String(still.version)}, not ${input.version}`);
      return { ok: true, deleted: false, snapshot: await snapshotIn(tx, input.taskId) };
    }
    await bumpCommentsRevision(tx, plan);
    return { ok: true, deleted: true, snapshot: await snapshotIn(tx, input.taskId) };
  });
}

/**
 * Deletes the task's plan and with it the collection. The comments are deleted by statement, not
 * left to the foreign key: a Kandev schema may declare it otherwise. The admissions stay, so no
 * create replayed afterwards brings a comment back (a recreated plan starts at revision 0).
 */
export function deleteTaskPlan(ctx: RepositoryContext, input: { taskId: string; planId: string }): Promise<DeletePlanResult> {
  return beginOrJoin(ctx, async (tx): Promise<DeletePlanResult> => {
    const plan = await lockedPlanOf(tx, input.taskId, input.planId);
    if (isNotFound(plan)) {
      if (plan.reason === 'task_not_found') return plan;
      return { ok: true, deleted: false, plan: null, snapshot: await snapshotIn(tx, input.taskId) };
    }
    await tx.knex('task_plan_comments').where({ task_id: input.taskId, plan_id: plan.id }).del();
    await tx.knex('task_plans').where({ id: plan.id, task_id: input.taskId }).del();
    return { ok: true, deleted: true, plan, snapshot: await snapshotIn(tx, input.taskId) };
  });
}
