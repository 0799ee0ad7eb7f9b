/**
 * pending_action vocabulary and the task-level rule. Per session the
 * database decides (clarification beats permission); per task, over input-capable sessions only,
 * permission beats clarification.
 */

export const PENDING_ACTIONS = ['clarification', 'permission'] as const;
export type PendingAction = (typeof PENDING_ACTIONS)[number];

export const SESSION_STATES = ['CREATED', 'STARTING', 'RUNNING', 'IDLE', 'WAITING_FOR_INPUT', 'COMPLETED', 'FAILED', 'CANCELLED'] as const;
export type SessionState = (typeof SESSION_STATES)[number];

export const TERMINAL_SESSION_STATES: readonly SessionState[] = ['COMPLETED', 'FAILED', 'CANCELLED'];

/** Session states whose agent takes a prompt now (Kandev's PROMPTABLE): a direct prompt is accepted, and a receipt delivered, only in these. */
export const PROMPTABLE_SESSION_STATES: readonly string[] = ['IDLE', 'WAITING_FOR_INPUT'] satisfies readonly SessionState[];

export function isTerminalSessionState(state: string): boolean {
  return (TERMINAL_SESSION_STATES as readonly string[]).includes(state);
}

/** Only sessions that can take input right now contribute to the task's pending state. */
export function isInputCapableSessionState(state: string): boolean {
  return state === 'RUNNING' || state === 'WAITING_FOR_INPUT';
}

export function isPendingAction(value: unknown): value is PendingAction {
  return value === 'clarification' || value === 'permission';
}

export interface SessionPendingAction {
  state: string;
  pendingAction: PendingAction | null;
}

/** Task-level pending action: permission wins, then clarification, over input-capable sessions. */
export function taskPendingAction(sessions: Iterable<SessionPendingAction>): PendingAction | null {
  let result: PendingAction | null = null;
  for (const session of sessions) {
    if (!isInputCapableSessionState(session.state)) continue;
    if (session.pendingAction === 'permission') return 'permission';
    if (session.pendingAction === 'clarification') result = 'clarification';
  }
  return result;
}
