import { TASK_SESSION_STATE_CHANGED } from '../../contract/kandevEvents.js';
import { PROMPTABLE_SESSION_STATES } from '../../turns/pendingAction.js';

/** Whether a session in `state` takes a prompt now: a direct prompt is accepted only then, and the dispatcher delivers only then. */
export function isPromptable(state: string): boolean {
  return PROMPTABLE_SESSION_STATES.includes(state);
}

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
