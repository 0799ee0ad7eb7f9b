/**
 * A few rows at a time, written through the repository the way Kandev writes them: a task with a
 * session, a clarification bundle. The tests' fixtures (test/support/seed.ts) and the respond
 * benchmark seed with these; bulk data for the other benchmarks comes from seeder.ts.
 */
import { randomUUID } from 'node:crypto';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import type { MessageRecord } from '../../src/repository/rowMapping.js';
import { createSession, createTask } from '../../src/repository/tasks.js';
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
