/**
 * A few rows at a time, written through the repository the way Kandev writes them: a task with a
 * session, a clarification bundle, a plan with comments. The tests' fixtures (test/support/seed.ts)
 * and the respond and send benchmarks seed with these; bulk data for the other benchmarks comes
 * from seeder.ts.
 */
import { randomUUID } from 'node:crypto';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import type { PlanCommentStore } from '../../src/repository/planComments/planCommentStore.js';
import type { MessageRecord } from '../../src/repository/rowMapping.js';
import { upsertTaskPlan } from '../../src/repository/planComments/taskPlans.js';
import { createSession, createTask } from '../../src/repository/tasks/tasks.js';
import { clarificationMetadata } from './messages.js';

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
    messages.push(
      await createMessage(ctx, {
        sessionId: options.sessionId,
        turnId: options.turnId,
        type: 'clarification_request',
        authorType: 'agent',
        content: `Question ${index + 1}`,
        requestsInput: index === statuses.length - 1,
        metadata: clarificationMetadata({ pendingId, index, total: statuses.length, status, context: 'seeded', extra: options.metadata }),
        createdAt: options.createdAt,
      }),
    );
  }
  return { pendingId, messages };
}

export interface SeededCommentedTask extends SeededSession {
  planId: string;
  /** The comments' ids and versions, in creation order: what a send carrying them names. */
  refs: Array<{ id: string; version: number }>;
}

/**
 * A task with one promptable (IDLE) primary session, a plan, and `comments` plan comments on it,
 * the comments written through the plan-comment store (`store` is `openPlanCommentStore(ctx)`).
 */
export async function seedCommentedTask(
  ctx: RepositoryContext,
  store: PlanCommentStore,
  options: { comments: number; workspaceId?: string },
): Promise<SeededCommentedTask> {
  const seeded = await seedSession(ctx, { workspaceId: options.workspaceId, state: 'IDLE' });
  const plan = await upsertTaskPlan(ctx, { taskId: seeded.taskId, title: 'Seeded plan', content: '# Plan\n\n1. Do the thing.\n2. Check it.\n' });
  const refs: Array<{ id: string; version: number }> = [];
  for (let i = 0; i < options.comments; i++) {
    const created = await store.createComment({
      taskId: seeded.taskId,
      planId: plan.id,
      commentId: randomUUID(),
      body: `Comment ${i + 1}: please reconsider this step and say why it is needed.`,
      selectedText: `${i + 1}. Do the thing.`,
      anchorFrom: 8,
      anchorTo: 24,
    });
    if (!created.ok || !created.comment) throw new Error(`seeding plan comment ${i + 1} of task ${seeded.taskId}: ${JSON.stringify(created)}`);
    refs.push({ id: created.comment.id, version: created.comment.version });
  }
  return { ...seeded, planId: plan.id, refs };
}
