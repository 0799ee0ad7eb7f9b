import { catalogRows, type SchemaTarget } from '../schema/catalog.js';

/**
 * Sessions holding more than one open turn (`completed_at IS NULL`). Nothing in the schema forbids
 * it; this service keeps one open turn per session when it writes turns, and D1 (ADR 0001) still
 * picks one of several deterministically, but a second open turn is a sign a writer lost track.
 */
export interface SeveralOpenTurns {
  readonly sessions: number;
  /** The sessions with the most open turns first, then by id. */
  readonly examples: ReadonlyArray<{ readonly sessionId: string; readonly openTurns: number }>;
}

const GROUPED = `SELECT task_session_id, COUNT(*) AS open_turns FROM task_session_turns
  WHERE completed_at IS NULL GROUP BY task_session_id HAVING COUNT(*) > 1`;

export async function findSeveralOpenTurns(target: SchemaTarget, examples = 5): Promise<SeveralOpenTurns> {
  const [counted] = await catalogRows<{ sessions: number | string }>(target, `SELECT COUNT(*) AS sessions FROM (${GROUPED}) several`);
  const rows = await catalogRows<{ task_session_id: unknown; open_turns: number | string }>(
    target,
    `${GROUPED} ORDER BY open_turns DESC, task_session_id LIMIT ?`,
    [examples],
  );
  return {
    sessions: Number(counted?.sessions ?? 0),
    examples: rows.map((row) => ({ sessionId: String(row.task_session_id), openTurns: Number(row.open_turns) })),
  };
}
