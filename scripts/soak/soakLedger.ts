/**
 * What the soak did, as the final checks need it: the tasks it drives, the comments it created and
 * deleted, the prompts the service accepted, the answers it claimed, and counters for the report.
 */
interface SoakSession {
  id: string;
  /** Has a live clarification waiter; otherwise answers go to the resume stream (detached). */
  live: boolean;
}

export interface SoakTask {
  taskId: string;
  workspaceId: string;
  planId: string;
  sessions: SoakSession[];
  deleted: boolean;
}

export interface SoakLedger {
  readonly tasks: SoakTask[];
  /** Plan comments created through the endpoint (ok replies), by id: their task. */
  readonly commentsCreated: Map<string, string>;
  /** Plan comments the soak deleted through the endpoint (ok replies). */
  readonly commentsDeleted: Set<string>;
  /** Prompts accepted (ok replies, first or replayed), by caller id: their task and how they went in. */
  readonly promptsAccepted: Map<string, { taskId: string; kind: 'send' | 'enqueue' | 'run' }>;
  /** pending ids a respond claimed (`claimed: true`). */
  readonly answersClaimed: Set<string>;
  /** Per kind of action: done, and refused or failed (a refusal is often the right answer). */
  readonly actions: Map<string, { ok: number; refused: number }>;
  /** Faults injected, by kind. */
  readonly faults: Map<string, number>;
  tally(action: string, ok: boolean): void;
  fault(kind: string): void;
  liveTasks(): SoakTask[];
}

export function createSoakLedger(): SoakLedger {
  const ledger: SoakLedger = {
    tasks: [],
    commentsCreated: new Map(),
    commentsDeleted: new Set(),
    promptsAccepted: new Map(),
    answersClaimed: new Set(),
    actions: new Map(),
    faults: new Map(),
    tally(action, ok) {
      const entry = ledger.actions.get(action) ?? { ok: 0, refused: 0 };
      if (ok) entry.ok++;
      else entry.refused++;
      ledger.actions.set(action, entry);
    },
    fault(kind) {
      ledger.faults.set(kind, (ledger.faults.get(kind) ?? 0) + 1);
    },
    liveTasks: () => ledger.tasks.filter((t) => !t.deleted),
  };
  return ledger;
}
