import { isInputCapableSessionState, type PendingAction } from './pendingAction.js';

/** A session as `task.pending_actions` lists it: in the order the sessions started, oldest first. */
export interface NavigableSession {
  session_id: string;
  state: string;
  is_primary: boolean;
  pending_action: PendingAction | null;
}

/**
 * Which session a task row opens (ADR "current turn owns active clarification"): while the task has
 * a pending action, the newest input-capable session whose own pending action is that one, before
 * any remembered or primary preference, so a question a secondary session owns is never hidden (if
 * none matches, e.g. the task's value is stale, the newest input-capable session with any pending
 * action). Otherwise the remembered session if it is still one of the task's, then the primary, then
 * the newest. null for a task without sessions.
 */
export function sessionToOpen(
  taskPendingAction: PendingAction | null,
  sessions: readonly NavigableSession[],
  rememberedSessionId?: string | null,
): string | null {
  const newestFirst = [...sessions].reverse();
  if (taskPendingAction !== null) {
    const asking = newestFirst.filter((s) => isInputCapableSessionState(s.state) && s.pending_action !== null);
    const owner = asking.find((s) => s.pending_action === taskPendingAction) ?? asking[0];
    if (owner) return owner.session_id;
  }
  const remembered = rememberedSessionId ? sessions.find((s) => s.session_id === rememberedSessionId) : undefined;
  return (remembered ?? newestFirst.find((s) => s.is_primary) ?? newestFirst[0])?.session_id ?? null;
}
