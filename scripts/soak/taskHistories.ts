import { randomUUID } from 'node:crypto';
import { seedClarificationBundle } from '../../bench/seed/fixtures.js';
import type { RepositoryContext } from '../../src/repository/context.js';
import { createMessage } from '../../src/repository/messages.js';
import { upsertTaskPlan } from '../../src/repository/planComments/taskPlans.js';
import { createSession, createTask, setSessionState } from '../../src/repository/tasks/tasks.js';
import { completeTurn, createLifecycleTurn, getActiveTurn, startTurn } from '../../src/repository/turns/turns.js';
import type { BackendEvents } from './backendEvents.js';
import type { SeededRandom } from './seededRandom.js';
import type { SoakLedger, SoakTask } from './soakLedger.js';

/**
 * Random task histories in the shapes of the shared current-turn fixture, written the way Kandev's
 * backend writes them (the row first, then the event): conversational turns opened and completed,
 * lifecycle turns and agent-boot messages on them (which never own state), open turns holding
 * questions, detached questions (sessions with no live waiter), permission requests pending,
 * approved and deleted, sessions going IDLE and RUNNING, tasks with several sessions, and whole
 * tasks deleted (and replaced, so the population stays the same).
 */
export interface TaskHistories {
  /** Creates a task with a plan and 1-3 sessions, each live or detached at random. */
  addTask(): Promise<SoakTask>;
  /** One random step of one random live task's history. */
  step(): Promise<void>;
}

const STEPS = {
  turn: 14,
  lifecycleTurn: 6,
  bootMessage: 6,
  question: 18,
  permission: 10,
  deletePermission: 5,
  sessionState: 10,
  addSession: 2,
  noise: 6,
  deleteTask: 0.4,
} as const;

export function createTaskHistories(
  ctx: RepositoryContext,
  events: BackendEvents,
  random: SeededRandom,
  ledger: SoakLedger,
  onSession: (id: string, live: boolean) => void,
): TaskHistories {
  const addSession = async (task: SoakTask, isPrimary: boolean) => {
    const session = await createSession(ctx, { taskId: task.taskId, state: random.pick(['IDLE', 'RUNNING']), isPrimary });
    const live = random.chance(0.6);
    task.sessions.push({ id: session.id, live });
    if (live) onSession(session.id, live);
    await startTurn(ctx, session.id);
    await events.announce('task_session.state_changed', { task_id: task.taskId, session_id: session.id, new_state: 'RUNNING' });
    return session.id;
  };

  const histories: TaskHistories = {
    async addTask() {
      const workspaceId = `ws-${randomUUID()}`;
      const created = await createTask(ctx, { workspaceId, title: 'soak task' });
      const plan = await upsertTaskPlan(ctx, { taskId: created.id, title: 'Soak plan', content: '# Plan\n\n1. Change it.\n2. Test it.\n' });
      const task: SoakTask = { taskId: created.id, workspaceId, planId: plan.id, sessions: [], deleted: false };
      const sessions = random.weighted({ one: 6, two: 3, three: 1 });
      await addSession(task, true);
      if (sessions !== 'one') await addSession(task, false);
      if (sessions === 'three') await addSession(task, false);
      // Only now: the users' loops pick a session of any task they see.
      ledger.tasks.push(task);
      await events.announce('task.created', { task_id: task.taskId, workspace_id: workspaceId });
      return task;
    },

    async step() {
      const task = random.pick(ledger.liveTasks());
      const session = random.pick(task.sessions);
      const sessionId = session.id;
      const taskId = task.taskId;
      const announce = (type: string, extra: Record<string, unknown> = {}) => events.announce(type, { task_id: taskId, session_id: sessionId, ...extra });
      const kind = random.weighted(STEPS);
      const open = await getActiveTurn(ctx, sessionId);
      switch (kind) {
        case 'turn':
          if (open) {
            await completeTurn(ctx, open.id);
            await announce('turn.completed', { turn_id: open.id });
          }
          if (random.chance(0.8)) await announce('turn.started', { turn_id: (await startTurn(ctx, sessionId)).id });
          break;
        case 'lifecycleTurn':
          await announce('turn.started', { turn_id: (await createLifecycleTurn(ctx, sessionId)).id });
          break;
        case 'bootMessage':
          await createMessage(ctx, { sessionId, type: 'script_execution', content: 'agent boot', completedTurn: true });
          await announce('message.added', { type: 'script_execution' });
          break;
        case 'question': {
          const turnId = open?.id ?? (await startTurn(ctx, sessionId)).id;
          const questions = random.int(1, 2);
          await seedClarificationBundle(ctx, { sessionId, turnId, statuses: Array.from({ length: questions }, () => 'pending') });
          await announce('message.added', { type: 'clarification_request', requests_input: true });
          break;
        }
        case 'permission':
          await createMessage(ctx, { sessionId, turnId: open?.id, type: 'permission_request', metadata: random.chance(0.6) ? {} : { status: 'approved' } });
          await announce('permission_request.received');
          break;
        case 'deletePermission': {
          const row = await ctx
            .knex('task_session_messages')
            .select('id')
            .where({ task_session_id: sessionId, type: 'permission_request' })
            .orderBy('id')
            .first();
          if (!row) break;
          await ctx.knex('task_session_messages').where({ id: row.id }).delete();
          await announce('message.deleted', { type: 'permission_request', message_id: row.id });
          break;
        }
        case 'sessionState': {
          const state = random.pick(['IDLE', 'RUNNING', 'WAITING_FOR_INPUT']);
          await setSessionState(ctx, sessionId, state);
          await announce('task_session.state_changed', { new_state: state });
          break;
        }
        case 'addSession':
          if (task.sessions.length < 3) await addSession(task, false);
          break;
        case 'noise':
          await announce('message.updated', { type: 'message' });
          break;
        case 'deleteTask':
          // Kandev deletes a task with everything under it (the foreign keys cascade).
          task.deleted = true;
          await ctx.knex('tasks').where({ id: taskId }).delete();
          await events.announce('task.deleted', { task_id: taskId });
          await histories.addTask();
          break;
      }
      ledger.tally(`history.${kind}`, true);
    },
  };
  return histories;
}
