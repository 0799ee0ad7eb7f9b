import { randomUUID } from 'node:crypto';
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import { createAttachmentStore, type AttachmentStore } from '../../src/repository/attachments/attachmentStore.js';
import { createPlanCommentStore, type PlanCommentStore } from '../../src/repository/planComments/planCommentStore.js';
import { createPromptStore, type PromptStore } from '../../src/repository/prompts/promptStore.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA, detectPlanCommentSchema, type PlanCommentSchema } from '../../src/repository/schema/planCommentTables.js';
import { upsertTaskPlan } from '../../src/repository/planComments/taskPlans.js';
import { createSession, createTask } from '../../src/repository/tasks/tasks.js';
import { eventually } from './nats.js';

export interface PlanTask {
  taskId: string;
  workspaceId: string;
  planId: string;
  /** The primary session, IDLE. */
  sessionId: string;
}

/** A task with a plan and one IDLE primary session, in its own workspace. */
export async function seedPlanTask(ctx: RepositoryContext, options: { sessionState?: string } = {}): Promise<PlanTask> {
  const workspaceId = `ws-${randomUUID()}`;
  const task = await createTask(ctx, { workspaceId, title: 'planned task' });
  const session = await createSession(ctx, { taskId: task.id, state: options.sessionState ?? 'IDLE', isPrimary: true });
  const plan = await upsertTaskPlan(ctx, { taskId: task.id, content: '# Plan\n1. migrate\n2. test' });
  return { taskId: task.id, workspaceId, planId: plan.id, sessionId: session.id };
}

/** The plan-comment, prompt and attachment stores over one context, as one object (tests use them side by side). */
export type OwnedStores = PlanCommentStore & PromptStore & AttachmentStore;

export function ownedStore(ctx: RepositoryContext, schema: PlanCommentSchema = COMPLETE_PLAN_COMMENT_SCHEMA): OwnedStores {
  return { ...createPlanCommentStore(ctx, schema), ...createPromptStore(ctx, schema), ...createAttachmentStore(ctx, schema) };
}

/** `ownedStore` over the tables the database's catalog has. */
export async function openOwnedStore(ctx: RepositoryContext): Promise<OwnedStores> {
  return ownedStore(ctx, await detectPlanCommentSchema(ctx));
}

const COUNTED = [
  'task_plan_comments',
  'task_plan_comment_admissions',
  'task_session_messages',
  'task_session_turns',
  'task_session_prompt_seq',
  'task_message_attachments',
] as const;

/**
 * Everything an acceptance may write, for one task: row counts, the revision, each attachment's
 * state, prompt counters, and the receipts. Two equal values mean nothing was consumed or written.
 */
export async function acceptanceState(ctx: RepositoryContext, taskId: string, receiptTable = 'queued_messages'): Promise<Record<string, unknown>> {
  const counts: Record<string, number> = {};
  for (const table of COUNTED) {
    const row = await ctx.knex(table).count<{ n: number | string }[]>({ n: '*' }).first();
    counts[table] = Number(row?.n ?? 0);
  }
  const receipts = await rawRows<Record<string, unknown>>(ctx, `SELECT id, session_id, delivery_kind FROM ${receiptTable} ORDER BY id`);
  const plan = await ctx.knex('task_plans').select('id', 'comments_revision').where({ task_id: taskId }).first();
  const comments = await ctx.knex('task_plan_comments').select('id', 'version', 'body').where({ task_id: taskId }).orderBy('id');
  const attachments = await ctx.knex('task_message_attachments').select('id', 'state', 'message_id', 'task_id', 'session_id').orderBy('id');
  const seq = await ctx.knex('task_session_prompt_seq').select('task_session_id', 'last_seq').orderBy('task_session_id');
  const task = await ctx.knex('tasks').select('updated_at').where({ id: taskId }).first();
  return {
    counts,
    receipts,
    revision: plan ? Number(plan.comments_revision) : null,
    comments: comments.map((c: Record<string, unknown>) => ({ ...c, version: Number(c.version) })),
    attachments,
    seq: seq.map((s: Record<string, unknown>) => ({ ...s, last_seq: Number(s.last_seq) })),
    taskUpdatedAt: task?.updated_at,
  };
}

/**
 * `acceptanceState` once every receipt was delivered: a worker's prompt dispatcher settles
 * (deletes) an accepted prompt's receipt right after the reply, so a snapshot taken while one is
 * in flight would differ from a later one by that deletion alone (the snapshot's counts and
 * receipts span every task). A receipt of an archived task is never delivered, so it is not waited
 * for; every session the tests address is otherwise promptable, so each receipt is settled soon.
 */
export async function settledAcceptanceState(ctx: RepositoryContext, taskId: string, receiptTable = 'queued_messages'): Promise<Record<string, unknown>> {
  const inFlight = () => rawRows(ctx, `SELECT q.id FROM ${receiptTable} q JOIN tasks tk ON tk.id = q.task_id WHERE tk.archived_at IS NULL`);
  await eventually(async () => ((await inFlight()).length === 0 ? true : undefined), 20_000, 'every receipt settled');
  return acceptanceState(ctx, taskId, receiptTable);
}

/**
 * 1 when a prompt was accepted under `id` and is still a receipt, or was delivered (its transcript
 * carries `prompt_delivery`); 0 when nothing was accepted; 2 would be a duplicate. One statement,
 * so a settlement cannot fall between the two counts.
 */
export async function acceptedOnce(ctx: RepositoryContext, id: string, receiptTable = 'queued_messages'): Promise<number> {
  const rows = await rawRows<{ n: number | string }>(
    ctx,
    `SELECT (SELECT COUNT(*) FROM ${receiptTable} WHERE id = ?) + (SELECT COUNT(*) FROM task_session_messages WHERE id = ? AND metadata LIKE '%"prompt_delivery"%') AS n`,
    [id, id],
  );
  return Number(rows[0]!.n);
}
