import { TASK_DELETED, TASK_SESSION_STATE_CHANGED, TASK_UPDATED } from '../../contract/kandevEvents.js';
import type { FinishedScope } from '../../repository/prompts/promptStore.js';
import { isTerminalSessionState } from '../../turns/sessionStates.js';

/**
 * The session whose prompt dispatcher an inbound event wakes, if any: a session that finished a
 * turn (`turn.completed`) or moved to a state other than RUNNING may take its next prompt now, not
 * at the next poll. A move to RUNNING cannot make a prompt due (it is often the dispatcher's own
 * claim at its delivery marker, coming back on the bus).
 */
export function sessionToWake(eventType: string, data: { session_id?: string; new_state?: unknown }): string | undefined {
  const wakes = eventType === 'turn.completed' || (eventType === TASK_SESSION_STATE_CHANGED && data.new_state !== 'RUNNING');
  return wakes && data.session_id ? data.session_id : undefined;
}

/**
 * The queues an inbound event may have finished, if any: a task's on `task.updated` (an archive)
 * and `task.deleted`, a session's on its move to a terminal state. The worker settles them
 * (queueLifecycle.ts) before it projects the event, so the projection already counts them gone.
 */
export function queueScopeToSettle(eventType: string, data: { task_id?: string; session_id?: string; new_state?: unknown }): FinishedScope | undefined {
  if ((eventType === TASK_UPDATED || eventType === TASK_DELETED) && data.task_id) return { taskId: data.task_id };
  if (eventType === TASK_SESSION_STATE_CHANGED && typeof data.new_state === 'string' && isTerminalSessionState(data.new_state) && data.session_id)
    return { sessionId: data.session_id };
  return undefined;
}
