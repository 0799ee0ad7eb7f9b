import { randomUUID } from 'node:crypto';
import type { RepositoryContext } from '../context.js';
import { createMessage } from '../messages.js';
import { openPlanCommentStore } from '../planComments/planCommentStore.js';
import { readQueueRevision } from '../prompts/queueRevision.js';
import { openPromptStore } from '../prompts/promptStore.js';
import { upsertTaskPlan } from '../planComments/taskPlans.js';
import { createSession, createTask } from '../tasks/tasks.js';
import { completeTurn, startTurn } from '../turns/turns.js';

/**
 * The small workspace `pending-projector sandbox` (and the demo) starts from, written through the
 * same repository writers the service and Kandev use, on a freshly migrated database:
 *
 * - a RUNNING task whose open turn asks a question (pending action `clarification`), then gets an
 *   agent-boot message on a later lifecycle turn that must not hide it;
 * - a WAITING_FOR_INPUT task whose agent asks a permission (`permission`);
 * - an IDLE task with a plan and two pending plan comments, ready for `plan_comment.run`;
 * - a RUNNING task with two queued prompts waiting for its turn to end (`queued_prompt_count` 2);
 * - an IDLE task whose paused queue holds one prompt (`queue.drain` delivers it);
 * - a COMPLETED task whose question was answered long ago (nothing pending).
 */

export interface SandboxWorkspace {
  workspaceId: string;
  question: { taskId: string; sessionId: string; pendingId: string; questionId: string; optionIds: string[] };
  permission: { taskId: string; sessionId: string; pendingId: string };
  plan: { taskId: string; sessionId: string; planId: string; comments: Array<{ id: string; version: number }> };
  /** `revision`: the queue's revision once seeded, for the guide's `queue.reorder`. */
  queue: { taskId: string; sessionId: string; queuedIds: string[]; revision: number };
  paused: { taskId: string; sessionId: string; queuedId: string };
  completed: { taskId: string; sessionId: string };
}

function clarification(pendingId: string, status: string) {
  return {
    pending_id: pendingId,
    question_id: 'q1',
    question: {
      id: 'q1',
      title: 'Cache placement',
      prompt: 'Should the cache live in the repository layer or the service layer?',
      options: [
        { option_id: 'repository', label: 'Repository layer', description: 'next to the SQL it saves' },
        { option_id: 'service', label: 'Service layer', description: 'where the requests arrive' },
      ],
    },
    question_index: 0,
    question_total: 1,
    status,
  };
}

async function seedQuestion(ctx: RepositoryContext, workspaceId: string): Promise<SandboxWorkspace['question']> {
  const task = await createTask(ctx, { workspaceId, title: 'Add a read cache', state: 'IN_PROGRESS' });
  const session = await createSession(ctx, { taskId: task.id, state: 'RUNNING', isPrimary: true });
  const turn = await startTurn(ctx, session.id);
  await createMessage(ctx, { sessionId: session.id, turnId: turn.id, authorType: 'user', content: 'Add a read cache to the task lookups.' });
  const pendingId = randomUUID();
  await createMessage(ctx, {
    sessionId: session.id,
    turnId: turn.id,
    type: 'clarification_request',
    requestsInput: true,
    content: 'Should the cache live in the repository layer or the service layer?',
    metadata: clarification(pendingId, 'pending'),
  });
  // The agent resumed after asking: its boot message opens a newer, lifecycle-only turn, which
  // must not become current and hide the question.
  await createMessage(ctx, { sessionId: session.id, type: 'script_execution', content: 'agent boot (resume)', completedTurn: true });
  return { taskId: task.id, sessionId: session.id, pendingId, questionId: 'q1', optionIds: ['repository', 'service'] };
}

async function seedPermission(ctx: RepositoryContext, workspaceId: string): Promise<SandboxWorkspace['permission']> {
  const task = await createTask(ctx, { workspaceId, title: 'Upgrade the test runner', state: 'IN_PROGRESS' });
  const session = await createSession(ctx, { taskId: task.id, state: 'WAITING_FOR_INPUT', isPrimary: true });
  const turn = await startTurn(ctx, session.id);
  await createMessage(ctx, { sessionId: session.id, turnId: turn.id, authorType: 'user', content: 'Upgrade vitest and fix what breaks.' });
  const pendingId = randomUUID();
  await createMessage(ctx, {
    sessionId: session.id,
    turnId: turn.id,
    type: 'permission_request',
    requestsInput: true,
    content: 'Allow command?',
    metadata: { pending_id: pendingId, tool_call_id: randomUUID(), action_type: 'bash', title: 'npm install vitest@latest', status: 'pending' },
  });
  return { taskId: task.id, sessionId: session.id, pendingId };
}

async function seedPlan(ctx: RepositoryContext, workspaceId: string): Promise<SandboxWorkspace['plan']> {
  const task = await createTask(ctx, { workspaceId, title: 'Write the release notes', state: 'IN_PROGRESS' });
  const session = await createSession(ctx, { taskId: task.id, state: 'IDLE', isPrimary: true });
  const turn = await startTurn(ctx, session.id);
  await createMessage(ctx, { sessionId: session.id, turnId: turn.id, content: 'Here is my plan for the release notes.' });
  await completeTurn(ctx, turn.id);
  const plan = await upsertTaskPlan(ctx, {
    taskId: task.id,
    title: 'Release notes',
    content: '# Plan\n\n1. Collect the merged changes.\n2. Group them by area.\n3. Write one line each.\n',
  });
  const store = await openPlanCommentStore(ctx);
  const comments: Array<{ id: string; version: number }> = [];
  for (const [body, selectedText] of [
    ['Only user-visible changes, please.', '1. Collect the merged changes.'],
    ['Put breaking changes first.', '2. Group them by area.'],
  ] as const) {
    const created = await store.createComment({ taskId: task.id, planId: plan.id, commentId: randomUUID(), body, selectedText });
    if (!created.ok || !created.comment) throw new Error(`seeding a plan comment: ${JSON.stringify(created)}`);
    comments.push({ id: created.comment.id, version: created.comment.version });
  }
  return { taskId: task.id, sessionId: session.id, planId: plan.id, comments };
}

async function seedQueue(ctx: RepositoryContext, workspaceId: string): Promise<SandboxWorkspace['queue']> {
  const task = await createTask(ctx, { workspaceId, title: 'Fix the flaky login test', state: 'IN_PROGRESS' });
  const session = await createSession(ctx, { taskId: task.id, state: 'RUNNING', isPrimary: true });
  const turn = await startTurn(ctx, session.id);
  await createMessage(ctx, { sessionId: session.id, turnId: turn.id, content: 'Running the login test 50 times to see how often it fails.' });
  // Queued while the agent is busy: they wait (the session is RUNNING) and are counted.
  const store = await openPromptStore(ctx);
  const queuedIds: string[] = [];
  for (const content of ['When that is done, also check the logout test.', 'Then open a pull request.']) {
    const accepted = await store.acceptPrompt({
      callerId: randomUUID(),
      target: { kind: 'session', sessionId: session.id },
      content,
      deliveryKind: 'queued',
      queueMaxPerSession: 10,
    });
    if (!accepted.ok) throw new Error(`seeding a queued prompt: ${JSON.stringify(accepted)}`);
    queuedIds.push(accepted.receiptId);
  }
  return { taskId: task.id, sessionId: session.id, queuedIds, revision: await readQueueRevision(ctx, session.id) };
}

async function seedCompleted(ctx: RepositoryContext, workspaceId: string): Promise<SandboxWorkspace['completed']> {
  const task = await createTask(ctx, { workspaceId, title: 'Rename the config flag', state: 'COMPLETED' });
  const session = await createSession(ctx, { taskId: task.id, state: 'COMPLETED', isPrimary: true });
  const turn = await startTurn(ctx, session.id);
  await createMessage(ctx, {
    sessionId: session.id,
    turnId: turn.id,
    type: 'clarification_request',
    content: 'Keep the old name as an alias?',
    metadata: clarification(randomUUID(), 'answered'),
  });
  await completeTurn(ctx, turn.id);
  return { taskId: task.id, sessionId: session.id };
}

async function seedPausedQueue(ctx: RepositoryContext, workspaceId: string): Promise<SandboxWorkspace['paused']> {
  const task = await createTask(ctx, { workspaceId, title: 'Tag the release', state: 'IN_PROGRESS' });
  const session = await createSession(ctx, { taskId: task.id, state: 'IDLE', isPrimary: true });
  const store = await openPromptStore(ctx);
  // Paused first: an IDLE session's queue would otherwise be delivered as soon as the worker starts.
  const paused = await store.setAutoRun(session.id, false);
  if (!paused.ok) throw new Error(`pausing the sandbox queue: ${JSON.stringify(paused)}`);
  const accepted = await store.acceptPrompt({
    callerId: randomUUID(),
    target: { kind: 'session', sessionId: session.id },
    content: 'Draft the notes from the merged pull requests.',
    deliveryKind: 'queued',
    queueMaxPerSession: 10,
  });
  if (!accepted.ok) throw new Error(`seeding a paused queued prompt: ${JSON.stringify(accepted)}`);
  return { taskId: task.id, sessionId: session.id, queuedId: accepted.receiptId };
}

/** Seeds the workspace on a migrated database with no tasks of `workspaceId` yet. */
export async function seedSandboxWorkspace(ctx: RepositoryContext, workspaceId = 'sandbox-workspace'): Promise<SandboxWorkspace> {
  return {
    workspaceId,
    question: await seedQuestion(ctx, workspaceId),
    permission: await seedPermission(ctx, workspaceId),
    plan: await seedPlan(ctx, workspaceId),
    queue: await seedQueue(ctx, workspaceId),
    paused: await seedPausedQueue(ctx, workspaceId),
    completed: await seedCompleted(ctx, workspaceId),
  };
}
