import { randomUUID } from 'node:crypto';
import { rawRows, type RepositoryContext } from '../context.js';
import { PlanCommentIntegrityError } from './planCommentOutcomes.js';
import {
  instantColumn,
  toPlanCommentRecord,
  toTaskPlanRecord,
  writtenNow,
  type PlanCommentRecord,
  type PlanCommentSnapshot,
  type TaskPlanRecord,
} from './planCommentRows.js';

/**
 * A task's plan and the snapshot of its comment collection. Plan writes are Kandev's; this service
 * writes only `comments_revision` (and deletes a plan on `plan.delete`, in owned mode only). `upsertTaskPlan` exists for
 * tests, the demo and the benchmarks.
 */

async function getTaskPlan(ctx: RepositoryContext, taskId: string): Promise<TaskPlanRecord | undefined> {
  const row = await ctx.knex('task_plans').where({ task_id: taskId }).first();
  return row ? toTaskPlanRecord(row) : undefined;
}

/**
 * The task's plan, row-locked until the transaction ends. Every write of the collection takes it
 * first (before any comment row), so writers of one collection queue here and never deadlock on
 * comment rows, and the revision bump they end with is never lost.
 */
export async function lockTaskPlan(tx: RepositoryContext, taskId: string): Promise<TaskPlanRecord | undefined> {
  const rows = await rawRows<Record<string, unknown>>(tx, `SELECT * FROM task_plans WHERE task_id = ?${tx.dialect.forUpdate}`, [taskId]);
  return rows[0] ? toTaskPlanRecord(rows[0]) : undefined;
}

/** Bumps the collection's revision after a committed change of it; returns the new revision. */
export async function bumpCommentsRevision(tx: RepositoryContext, plan: { id: string; taskId: string }): Promise<number> {
  const rows = await rawRows<{ comments_revision: number | string }>(
    tx,
    `UPDATE task_plans SET comments_revision = comments_revision + 1 WHERE id = ? AND task_id = ? RETURNING comments_revision`,
    [plan.id, plan.taskId],
  );
  if (rows.length !== 1) throw new PlanCommentIntegrityError(`plan ${plan.id} of task ${plan.taskId} vanished while its collection changed`);
  return Number(rows[0]!.comments_revision);
}

export async function taskExists(ctx: RepositoryContext, taskId: string): Promise<boolean> {
  return (await ctx.knex('tasks').select('id').where({ id: taskId }).first()) !== undefined;
}

/**
 * The task's collection: its plan's comments in (created_at, id) order, ids compared byte-wise on
 * both dialects. Undefined when the task does not exist; `planId: null` (revision 0, no comments)
 * when it has no plan.
 */
export async function readPlanCommentSnapshot(ctx: RepositoryContext, taskId: string): Promise<PlanCommentSnapshot | undefined> {
  const plan = await getTaskPlan(ctx, taskId);
  if (!plan) return (await taskExists(ctx, taskId)) ? { taskId, planId: null, revision: 0, comments: [] } : undefined;
  return { taskId, planId: plan.id, revision: plan.commentsRevision, comments: await planCommentsOf(ctx, taskId, plan.id) };
}

/** The plan's comments in the snapshot's (created_at, id) order, ids compared byte-wise on both dialects. */
export async function planCommentsOf(ctx: RepositoryContext, taskId: string, planId: string): Promise<PlanCommentRecord[]> {
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT * FROM task_plan_comments WHERE task_id = ? AND plan_id = ?
      ORDER BY ${instantColumn(ctx, 'created_at')}, ${ctx.dialect.binaryText('id')}`,
    [taskId, planId],
  );
  return rows.map(toPlanCommentRecord);
}

export interface UpsertTaskPlanInput {
  taskId: string;
  id?: string;
  title?: string;
  content?: string;
  createdBy?: string;
}

/**
 * Creates the task's plan, or replaces the content and title of the one it has (same id, same
 * comments, same revision: editing a plan keeps its comments). For tests, the demo and benchmarks.
 */
export async function upsertTaskPlan(ctx: RepositoryContext, input: UpsertTaskPlanInput): Promise<TaskPlanRecord> {
  const now = writtenNow(ctx);
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `INSERT INTO task_plans (id, task_id, title, content, created_by, created_at, updated_at, comments_revision)
     VALUES (?, ?, ?, ?, ?, ?, ?, 0)
     ON CONFLICT (task_id) DO UPDATE SET title = excluded.title, content = excluded.content, updated_at = excluded.updated_at
     RETURNING *`,
    [input.id ?? randomUUID(), input.taskId, input.title ?? 'Plan', input.content ?? '', input.createdBy ?? 'agent', now, now],
  );
  return toTaskPlanRecord(rows[0]!);
}
