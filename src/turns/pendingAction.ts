/**
 * pending_action vocabulary and the task-level rule. Per session the
 * database decides (clarification beats permission); per task, over input-capable sessions only,
 * permission beats clarification.
 */

export const PENDING_ACTIONS = ['clarification', 'permission'] as const;
export type PendingAction = (typeof PENDING_ACTIONS)[number];

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
