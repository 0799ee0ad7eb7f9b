import { isTruthyFlag } from './lifecycleTurn.js';

/**
 * Whether a pending clarification row on the current turn is live: its agent still waits on it
 * (not `agent_disconnected`). Unreadable metadata counts as live, so neither the workflow guard
 * nor the prompt dispatcher ever under-reports a waiting agent. A detached row does not block:
 * its answer becomes a resume command, and queued prompts may go to the session meanwhile.
 */
export function isLiveClarification(row: { metadataValid: boolean; metadata: Record<string, unknown> }): boolean {
  return !row.metadataValid || !isTruthyFlag(row.metadata.agent_disconnected);
}
