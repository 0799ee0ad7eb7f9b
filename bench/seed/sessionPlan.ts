/**
 * The rich sessions of the query benchmark: the rows of a range of sessions (Kandev's shapes,
 * canonical timestamps) and, computed from those rows alone, the pending action each session must
 * resolve to. Pure: no I/O, and session `i` always produces the same rows whatever batch it is
 * generated in.
 *
 * Vocabulary as in src/repository/turns/currentTurnAuthority.ts. Each session has TURNS_PER_SESSION turn
 * records and MESSAGES_PER_SESSION messages; two sessions share a task.
 */

import { microsToTimestamp } from '../../src/timestamps.js';
import type { PendingAction } from '../../src/turns/pendingAction.js';
import { isTerminalSessionState } from '../../src/turns/sessionStates.js';
import type { Row } from './bulkInsert.js';
import { clarificationBundle, currentTurnSpecials, ordinaryMessage, permissionRequest, type PlannedMessage } from './messages.js';
import { createIdSource, createRng, intBetween, pick, type Gen } from './random.js';

export const TURNS_PER_SESSION = 20;
export const MESSAGES_PER_SESSION = 50;
const SESSIONS_PER_TASK = 2;

export interface SeedBatch {
  tasks: Row[];
  sessions: Row[];
  turns: Row[];
  messages: Row[];
  /** Every session of the batch, in index order. */
  sessionIds: string[];
  /** Sessions that must resolve to a pending action; the others must be absent from the map. */
  expected: Map<string, PendingAction>;
  /** How many sessions of the batch use each tail shape (for the printed mix). */
  tails: Map<TailShape, number>;
}

/** The shape of a session's newest turns, the part the current-turn rule is sensitive to. */
export type TailShape =
  | 'completed'
  | 'open'
  | 'open-then-lifecycle'
  | 'lifecycle-newest'
  | 'reservation-unattempted'
  | 'reservation-attempted'
  | 'reservation-with-evidence'
  | 'zero-duration-legacy'
  | 'started-at-tie'
  | 'only-lifecycle';

const TAIL_WEIGHTS: ReadonlyArray<[TailShape, number]> = [
  ['completed', 30],
  ['open', 25],
  ['open-then-lifecycle', 10],
  ['lifecycle-newest', 10],
  ['reservation-unattempted', 8],
  ['reservation-attempted', 5],
  ['reservation-with-evidence', 4],
  ['zero-duration-legacy', 3],
  ['started-at-tie', 4],
  ['only-lifecycle', 1],
];

const STATE_WEIGHTS: ReadonlyArray<[string, number]> = [
  ['RUNNING', 62],
  ['WAITING_FOR_INPUT', 10],
  ['IDLE', 13],
  ['COMPLETED', 12],
  ['FAILED', 2],
  ['CANCELLED', 1],
];

const BASE_MICROS = Date.parse('2026-01-05T08:00:00Z') * 1000;
const SESSION_SPACING_MICROS = 90_000_000;
const TURN_SPACING_MICROS = 45_000_000;
const MESSAGE_SPACING_MICROS = 250_000;
const WORKSPACES = 100;

type TurnKind = 'conversational' | 'lifecycle' | 'reservation-unattempted' | 'reservation-attempted' | 'reservation-with-evidence';

interface PlannedTurn {
  id: string;
  kind: TurnKind;
  startedMicros: number;
  createdMicros: number;
  /** 'open', 'zero' (completed_at = started_at) or 'after-messages'. */
  completion: 'open' | 'zero' | 'after-messages';
  metadata: Record<string, unknown>;
  messages: PlannedMessage[];
}

function planTurns(g: Gen, sessionStartMicros: number, tail: TailShape): PlannedTurn[] {
  const { rng } = g;
  const turns: PlannedTurn[] = [];
  const at = (k: number) => sessionStartMicros + k * TURN_SPACING_MICROS + intBetween(rng, 0, 5_000_000);
  const make = (kind: TurnKind, k: number, completion: PlannedTurn['completion'], metadata: Record<string, unknown>): PlannedTurn => {
    const startedMicros = at(k);
    return { id: g.id(), kind, startedMicros, createdMicros: startedMicros, completion, metadata, messages: [] };
  };
  const lifecycle = (k: number) => make('lifecycle', k, 'zero', { lifecycle_only: true });
  const conversational = (k: number, completion: PlannedTurn['completion']) =>
    // A fifth of the older turns carry the cleared reservation flags Kandev leaves behind.
    make('conversational', k, completion, rng() < 0.2 ? { prompt_dispatch_pending: false, prompt_dispatch_attempted: true } : {});

  const tailLength = tail === 'completed' || tail === 'open' ? 1 : 2;
  for (let k = 0; k < TURNS_PER_SESSION - tailLength; k += 1) {
    if (tail === 'only-lifecycle' || (k > 0 && rng() < 0.15)) turns.push(lifecycle(k));
    else turns.push(conversational(k, 'after-messages'));
  }
  const n = TURNS_PER_SESSION - tailLength;
  switch (tail) {
    case 'completed':
      turns.push(conversational(n, 'after-messages'));
      break;
    case 'open':
      turns.push(conversational(n, 'open'));
      break;
    case 'open-then-lifecycle': {
      // Scenario 1: the resume path writes a lifecycle turn 0.8 s after the real, still open turn.
      const open = conversational(n, 'open');
      const boot = lifecycle(n + 1);
      boot.startedMicros = open.startedMicros + 800_000;
      boot.createdMicros = boot.startedMicros;
      turns.push(open, boot);
      break;
    }
    case 'lifecycle-newest':
      turns.push(conversational(n, 'after-messages'), lifecycle(n + 1));
      break;
    case 'reservation-unattempted':
      turns.push(conversational(n, rng() < 0.5 ? 'open' : 'after-messages'), make('reservation-unattempted', n + 1, 'open', { prompt_dispatch_pending: true }));
      break;
    case 'reservation-attempted':
      turns.push(
        conversational(n, 'after-messages'),
        make('reservation-attempted', n + 1, 'open', { prompt_dispatch_pending: true, prompt_dispatch_attempted: true }),
      );
      break;
    case 'reservation-with-evidence':
      turns.push(conversational(n, 'after-messages'), make('reservation-with-evidence', n + 1, 'open', { prompt_dispatch_pending: true }));
      break;
    case 'zero-duration-legacy':
      // An abandoned turn buried with zero duration and no lifecycle mark stays conversational (D3).
      turns.push(conversational(n, 'after-messages'), make('conversational', n + 1, 'zero', {}));
      break;
    case 'started-at-tie': {
      // Same started_at: created_at decides, here in favour of the older row.
      const a = conversational(n, 'after-messages');
      const b = conversational(n + 1, 'after-messages');
      b.startedMicros = a.startedMicros;
      b.createdMicros = a.startedMicros;
      a.createdMicros = a.startedMicros + 1;
      turns.push(a, b);
      break;
    }
    case 'only-lifecycle':
      turns.push(lifecycle(n), lifecycle(n + 1));
      break;
  }
  return turns;
}

/** Whether `turn` may own the session's state (reservation filter, then not lifecycle). */
function authorityEligible(turn: PlannedTurn): boolean {
  if (turn.metadata.lifecycle_only === true) return false;
  const reservation = turn.metadata.prompt_dispatch_pending === true;
  return !reservation || turn.metadata.prompt_dispatch_attempted === true || turn.messages.length > 0;
}

function completedMicros(turn: PlannedTurn): number | null {
  if (turn.completion === 'open') return null;
  if (turn.completion === 'zero') return turn.startedMicros;
  return turn.startedMicros + (turn.messages.length + 1) * MESSAGE_SPACING_MICROS + 2_000_000;
}

/** D1's total order, written independently of the SQL: open first, then newest start, creation, id. */
function compareAuthority(a: PlannedTurn, b: PlannedTurn): number {
  const openA = completedMicros(a) === null ? 0 : 1;
  const openB = completedMicros(b) === null ? 0 : 1;
  if (openA !== openB) return openA - openB;
  if (a.startedMicros !== b.startedMicros) return b.startedMicros - a.startedMicros;
  if (a.createdMicros !== b.createdMicros) return b.createdMicros - a.createdMicros;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

function currentTurnOf(turns: PlannedTurn[]): PlannedTurn | undefined {
  return turns.filter(authorityEligible).sort(compareAuthority)[0];
}

function isPendingStatus(metadata: Record<string, unknown>): boolean {
  const status = metadata.status;
  return status === undefined || status === null || status === '' || status === 'pending';
}

/** The session's pending action by the domain rules, from the planned rows alone. */
function expectedAction(state: string, turns: PlannedTurn[]): PendingAction | undefined {
  if (isTerminalSessionState(state)) return undefined;
  const current = currentTurnOf(turns);
  if (!current) return undefined;
  if (current.messages.some((m) => m.type === 'clarification_request' && isPendingStatus(m.metadata))) return 'clarification';
  // Messages of a turn are created in list order with distinct instants, so the last one is newest.
  const permissions = current.messages.filter((m) => m.type === 'permission_request');
  const newest = permissions[permissions.length - 1];
  return newest && isPendingStatus(newest.metadata) ? 'permission' : undefined;
}

function distributeMessages(g: Gen, turns: PlannedTurn[]): void {
  const { rng } = g;
  // Lifecycle turns parent one boot message; unattempted reservations have none (that is what makes
  // them invisible); every other turn opens with the user's prompt.
  for (const turn of turns) {
    if (turn.kind === 'lifecycle') {
      turn.messages.push({ type: 'script_execution', authorType: 'agent', content: 'agent boot', requestsInput: false, metadata: {} });
    } else if (turn.kind !== 'reservation-unattempted' && turn.kind !== 'reservation-attempted') {
      turn.messages.push(ordinaryMessage(g, 'user'));
    }
  }
  const current = currentTurnOf(turns);
  const older = turns.filter((t) => t.kind === 'conversational' && t !== current);
  const olderTurn = () => older[Math.floor(rng() * older.length)];
  // History the rule must ignore: answered bundles, approved permissions, and now and then a stale
  // pending bundle left in an earlier turn.
  const history: Array<[PlannedTurn | undefined, PlannedMessage[]]> = [];
  if (rng() < 0.3) history.push([olderTurn(), clarificationBundle(g, ['answered', 'answered'])]);
  if (rng() < 0.2) history.push([olderTurn(), [permissionRequest(g, 'approved')]]);
  if (rng() < 0.1) history.push([olderTurn(), clarificationBundle(g, ['pending'])]);
  const specials = current ? currentTurnSpecials(g) : [];

  const fillable = turns.filter((t) => t.kind === 'conversational' || t.kind === 'reservation-with-evidence');
  const targets = fillable.length > 0 ? fillable : turns;
  let used = turns.reduce((sum, t) => sum + t.messages.length, 0);
  used += history.reduce((sum, [turn, rows]) => sum + (turn ? rows.length : 0), 0) + specials.length;
  for (; used < MESSAGES_PER_SESSION; used += 1) {
    targets[Math.floor(rng() * targets.length)]!.messages.push(ordinaryMessage(g, 'agent'));
  }
  for (const [turn, rows] of history) turn?.messages.push(...rows);
  // Requests for input come last in their turn, as an agent asks at the end of its output.
  current?.messages.push(...specials);
}

/** Rows and expected outcomes of sessions [start, start + count); `start` must be even (tasks pair sessions). */
export function planBatch(start: number, count: number): SeedBatch {
  const batch: SeedBatch = { tasks: [], sessions: [], turns: [], messages: [], sessionIds: [], expected: new Map(), tails: new Map() };
  for (let i = start; i < start + count; i += 1) {
    const rng = createRng(0x5eed ^ Math.imul(i + 1, 0x9e3779b1));
    const g: Gen = { rng, id: createIdSource(rng, i) };
    const taskIndex = Math.floor(i / SESSIONS_PER_TASK);
    const taskId = `task-${String(taskIndex).padStart(6, '0')}`;
    const startMicros = BASE_MICROS + i * SESSION_SPACING_MICROS;
    if (i % SESSIONS_PER_TASK === 0) {
      const created = microsToTimestamp(startMicros - 60_000_000);
      batch.tasks.push({
        id: taskId,
        workspace_id: `ws-${taskIndex % WORKSPACES}`,
        title: `Benchmark task ${taskIndex}`,
        state: 'IN_PROGRESS',
        metadata: '{}',
        created_at: created,
        updated_at: created,
      });
    }
    const state = pick(rng, STATE_WEIGHTS);
    const tail = pick(rng, TAIL_WEIGHTS);
    batch.tails.set(tail, (batch.tails.get(tail) ?? 0) + 1);
    const turns = planTurns(g, startMicros, tail);
    distributeMessages(g, turns);

    const sessionId = g.id();
    const lastMicros = Math.max(...turns.map((t) => completedMicros(t) ?? t.startedMicros));
    batch.sessionIds.push(sessionId);
    batch.sessions.push({
      id: sessionId,
      task_id: taskId,
      state,
      metadata: '{}',
      name: '',
      is_primary: i % SESSIONS_PER_TASK === 0 ? 1 : 0,
      started_at: microsToTimestamp(startMicros),
      completed_at: isTerminalSessionState(state) ? microsToTimestamp(lastMicros + 1_000_000) : null,
      updated_at: microsToTimestamp(lastMicros + 1_000_000),
    });
    for (const turn of turns) {
      const completed = completedMicros(turn);
      batch.turns.push({
        id: turn.id,
        task_session_id: sessionId,
        task_id: taskId,
        started_at: microsToTimestamp(turn.startedMicros),
        completed_at: completed === null ? null : microsToTimestamp(completed),
        metadata: JSON.stringify(turn.metadata),
        created_at: microsToTimestamp(turn.createdMicros),
        updated_at: microsToTimestamp(completed ?? turn.createdMicros),
      });
      turn.messages.forEach((message, j) => {
        const created = microsToTimestamp(turn.startedMicros + (j + 1) * MESSAGE_SPACING_MICROS);
        batch.messages.push({
          id: g.id(),
          task_session_id: sessionId,
          task_id: taskId,
          turn_id: turn.id,
          author_type: message.authorType,
          author_id: message.authorType === 'user' ? 'user-1' : 'agent-claude',
          content: message.content,
          requests_input: message.requestsInput ? 1 : 0,
          type: message.type,
          metadata: JSON.stringify(message.metadata),
          created_at: created,
          updated_at: created,
          prompt_seq: 0,
        });
      });
    }
    const action = expectedAction(state, turns);
    if (action) batch.expected.set(sessionId, action);
  }
  return batch;
}
