import { randomUUID } from 'node:crypto';
import { storedNow, type RepositoryContext } from '../context.js';
import { toSessionRecord, toTaskRecord, type SessionRecord, type TaskRecord } from '../rowMapping.js';
import { toCanonicalTimestamp } from '../../timestamps.js';

export interface CreateTaskInput {
  id?: string;
  workspaceId: string;
  title?: string;
  state?: string;
}

export async function createTask(ctx: RepositoryContext, input: CreateTaskInput): Promise<TaskRecord> {
  const now = storedNow(ctx);
  const row = {
    id: input.id ?? randomUUID(),
    workspace_id: input.workspaceId,
    title: input.title ?? '',
    state: input.state ?? 'TODO',
    metadata: '{}',
    created_at: now,
    updated_at: now,
  };
  await ctx.knex('tasks').insert(row);
  return toTaskRecord(row);
}

export async function getTask(ctx: RepositoryContext, taskId: string): Promise<TaskRecord | undefined> {
  const row = await ctx.knex('tasks').where({ id: taskId }).first();
  return row ? toTaskRecord(row) : undefined;
}

export interface CreateSessionInput {
  id?: string;
  taskId: string;
  state?: string;
  isPrimary?: boolean;
  startedAt?: string;
}

export async function createSession(ctx: RepositoryContext, input: CreateSessionInput): Promise<SessionRecord> {
  const now = storedNow(ctx);
  const row = {
    id: input.id ?? randomUUID(),
    task_id: input.taskId,
    state: input.state ?? 'RUNNING',
    metadata: '{}',
    is_primary: input.isPrimary ? 1 : 0,
    started_at: input.startedAt ? ctx.dialect.storedTimestamp(toCanonicalTimestamp(input.startedAt)) : now,
    updated_at: now,
  };
  await ctx.knex('task_sessions').insert(row);
  return toSessionRecord(row);
}

export async function getSession(ctx: RepositoryContext, sessionId: string): Promise<SessionRecord | undefined> {
  const row = await ctx.knex('task_sessions').where({ id: sessionId }).first();
  return row ? toSessionRecord(row) : undefined;
}

/** Moves a session to `state`; returns false when the session does not exist. */
export async function setSessionState(ctx: RepositoryContext, sessionId: string, state: string): Promise<boolean> {
  const changed = await ctx
    .knex('task_sessions')
    .where({ id: sessionId })
    .update({ state, updated_at: storedNow(ctx) });
  return changed > 0;
}

/** Keyset page of task ids after `afterId` (exclusive), ascending. */
export async function listTaskIdsAfter(ctx: RepositoryContext, afterId: string | null, limit: number): Promise<string[]> {
  const query = ctx.knex('tasks').select('id').orderBy('id').limit(limit);
  if (afterId !== null) query.where('id', '>', afterId);
  return (await query).map((r: Record<string, unknown>) => String(r.id));
}

/** A page of tasks as task.list lists them: not archived, in id order, after `afterId` (exclusive). */
export async function listTasksPage(
  ctx: RepositoryContext,
  options: { workspaceId?: string; afterId?: string; limit: number },
): Promise<Array<{ id: string; workspaceId: string }>> {
  const query = ctx.knex('tasks').select('id', 'workspace_id').whereNull('archived_at').orderBy('id').limit(options.limit);
  if (options.workspaceId !== undefined) query.where('workspace_id', options.workspaceId);
  if (options.afterId !== undefined) query.where('id', '>', options.afterId);
  return (await query).map((r: Record<string, unknown>) => ({ id: String(r.id), workspaceId: String(r.workspace_id ?? '') }));
}

export async function countTasks(ctx: RepositoryContext): Promise<number> {
  const row = await ctx.knex('tasks').count<{ n: number | string }[]>({ n: '*' }).first();
  return Number(row?.n ?? 0);
}

/** The task of a session, for events that carry only a session id. */
export async function taskIdOfSession(ctx: RepositoryContext, sessionId: string): Promise<string | undefined> {
  const row = await ctx.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
  return row ? String(row.task_id) : undefined;
}

/**
 * The task's primary session, as acceptPrompt resolves it (earliest started, then id, should a
 * database hold several): what Run's preflight addresses before the accepting transaction checks it.
 */
export async function getPrimarySession(ctx: RepositoryContext, taskId: string): Promise<SessionRecord | undefined> {
  const row = await ctx.knex('task_sessions').where({ task_id: taskId, is_primary: 1 }).orderBy('started_at').orderByRaw(ctx.dialect.binaryText('id')).first();
  return row ? toSessionRecord(row) : undefined;
}
