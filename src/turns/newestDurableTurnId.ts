import { isLifecycleTurn } from './lifecycleTurn.js';

/** A turn as UI clients receive it from the turns listing. */
export interface DurableTurn {
  id: string;
  started_at: string;
  created_at: string;
  /** Absent or null while the turn is open. */
  completed_at?: string | null;
  metadata?: Record<string, unknown> | null;
}

const RFC3339_FRACTION = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z$/;

/**
 * Sort key for an RFC 3339 UTC timestamp: the fraction padded to nine digits so string order is
 * time order (an exact second must sort before `.000000001`). Other formats compare as given.
 */
export function durableTurnTimestampKey(value: string): string {
  const match = RFC3339_FRACTION.exec(value);
  if (!match) return value;
  return `${match[1]}.${(match[2] ?? '').padEnd(9, '0')}Z`;
}

function compareDesc(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}

/**
 * D1's total order: open before completed, then started_at, created_at and id descending.
 * Negative when `a` outranks `b`.
 */
export function compareCurrentTurnCandidates(a: DurableTurn, b: DurableTurn): number {
  const openA = a.completed_at == null ? 0 : 1;
  const openB = b.completed_at == null ? 0 : 1;
  if (openA !== openB) return openA - openB;
  return (
    compareDesc(durableTurnTimestampKey(a.started_at), durableTurnTimestampKey(b.started_at)) ||
    compareDesc(durableTurnTimestampKey(a.created_at), durableTurnTimestampKey(b.created_at)) ||
    compareDesc(a.id, b.id)
  );
}

/**
 * The session's current turn as a UI computes it from the visible turn history (spec AC-9):
 * `undefined` when the history is not loaded (fall back to the server's pending_action), `null`
 * when it is loaded and holds no conversational turn (hide every pending message), otherwise the
 * id of the first conversational turn under D1's order.
 */
export function newestDurableTurnId(turns: readonly DurableTurn[] | undefined | null): string | null | undefined {
  if (turns === undefined || turns === null) return undefined;
  let best: DurableTurn | undefined;
  for (const turn of turns) {
    if (isLifecycleTurn(turn)) continue;
    if (best === undefined || compareCurrentTurnCandidates(turn, best) < 0) best = turn;
  }
  return best ? best.id : null;
}
