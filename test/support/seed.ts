import { randomUUID } from 'node:crypto';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import type { MessageRecord } from '../../src/repository/rowMapping.js';
import { createSession, createTask } from '../../src/repository/tasks.js';
import { toCanonicalTimestamp } from '../../src/timestamps.js';

export interface SeededSession {
  taskId: string;
  sessionId: string;
  workspaceId: string;
}

/** A task with one session (RUNNING unless told otherwise), in its own workspace unless given one. */
export async function seedSession(
  ctx: RepositoryContext,
  options: { workspaceId?: string; state?: string; taskId?: string; isPrimary?: boolean } = {},
): Promise<SeededSession> {
  const workspaceId = options.workspaceId ?? `ws-${randomUUID()}`;
  const taskId = options.taskId ?? (await createTask(ctx, { workspaceId, title: 'seeded task' })).id;
  const session = await createSession(ctx, { taskId, state: options.state ?? 'RUNNING', isPrimary: options.isPrimary ?? true });
  return { taskId, sessionId: session.id, workspaceId };
}

export interface SeedTurn {
  id?: string;
  startedAt: string;
  createdAt?: string;
  completedAt?: string | null;
  metadata?: Record<string, unknown> | string | null;
}

/**
 * Inserts a turn row exactly as given (explicit instants, raw metadata text allowed), the way a
 * fixture or a legacy row from another producer looks. Production code writes turns through
 * src/repository/turns.ts.
 */
export async function seedTurnAt(ctx: RepositoryContext, sessionId: string, turn: SeedTurn): Promise<string> {
  const session = await ctx.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
  const id = turn.id ?? randomUUID();
  const startedAt = toCanonicalTimestamp(turn.startedAt);
  await ctx.knex('task_session_turns').insert({
    id,
    task_session_id: sessionId,
    task_id: session.task_id,
    started_at: startedAt,
    created_at: toCanonicalTimestamp(turn.createdAt ?? turn.startedAt),
    completed_at: turn.completedAt ? toCanonicalTimestamp(turn.completedAt) : null,
    metadata: typeof turn.metadata === 'string' || turn.metadata === null ? turn.metadata : JSON.stringify(turn.metadata ?? {}),
    updated_at: startedAt,
  });
  return id;
}

export interface SeedBundleOptions {
  sessionId: string;
  turnId: string;
  pendingId?: string;
  /** One entry per question; `undefined` leaves the status key out (legacy "missing status"). */
  statuses?: Array<string | undefined>;
  /** Extra metadata merged into every row. */
  metadata?: Record<string, unknown>;
  createdAt?: string;
}

/** A clarification bundle written the way Kandev writes one: one row per question, shared pending_id. */
export async function seedClarificationBundle(ctx: RepositoryContext, options: SeedBundleOptions): Promise<{ pendingId: string; messages: MessageRecord[] }> {
  const pendingId = options.pendingId ?? randomUUID();
  const statuses = options.statuses ?? ['pending'];
  const messages: MessageRecord[] = [];
  for (const [index, status] of statuses.entries()) {
    const questionId = `q${index + 1}`;
    const metadata: Record<string, unknown> = {
      pending_id: pendingId,
      question_id: questionId,
      question: {
        id: questionId,
        title: `Question ${index + 1}`,
        prompt: `Which option for question ${index + 1}?`,
        options: [
          { option_id: 'a', label: 'A', description: '' },
          { option_id: 'b', label: 'B', description: '' },
        ],
      },
      question_index: index,
      question_total: statuses.length,
      context: 'seeded',
      ...options.metadata,
    };
    if (status !== undefined) metadata.status = status;
    messages.push(
      await createMessage(ctx, {
        sessionId: options.sessionId,
        turnId: options.turnId,
        type: 'clarification_request',
        authorType: 'agent',
        content: `Question ${index + 1}`,
        requestsInput: index === statuses.length - 1,
        metadata,
        createdAt: options.createdAt,
      }),
    );
  }
  return { pendingId, messages };
}

/** A RUNNING task whose open turn asks one pending question: its pending action is 'clarification'. */
export async function seedTaskWithQuestion(ctx: RepositoryContext): Promise<SeededSession> {
  const seeded = await seedSession(ctx);
  const turnId = await seedTurnAt(ctx, seeded.sessionId, { startedAt: new Date().toISOString() });
  await seedClarificationBundle(ctx, { sessionId: seeded.sessionId, turnId });
  return seeded;
}
