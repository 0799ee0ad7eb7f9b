/**
 * The many small tasks of the worker benchmark, in one of two shapes. Pure: task `i` always
 * produces the same rows whatever batch it is planned in.
 *
 * - Toggle tasks: one RUNNING session whose open turn holds a pending clarification, so flipping
 *   the session between RUNNING and IDLE flips the task's pending action between 'clarification'
 *   and none: one cheap UPDATE makes every listed task's summary stale.
 * - Mixed tasks: a session in a random state whose only turn may end with a pending clarification
 *   or permission, and a stored summary that is missing, stale or correct.
 *
 * Ids are zero-padded so keyset order is index order. The expected drift of every task is computed
 * from the planned rows alone, so the benchmark checks reconcile's answer independently of the SQL.
 */
import { canonicalSummaryJson, withPendingAction } from '../../src/events/statusSummary.js';
import { microsToTimestamp } from '../../src/timestamps.js';
import { isInputCapableSessionState, type PendingAction } from '../../src/turns/pendingAction.js';
import type { Row } from './bulkInsert.js';
import { createRng, pick } from './random.js';

const BASE_MICROS = Date.parse('2026-01-05T08:00:00Z') * 1000;
const WORKSPACES = 100;

const taskIdOf = (i: number) => `bt-${String(i).padStart(7, '0')}`;
const sessionIdOf = (i: number) => `bs-${String(i).padStart(7, '0')}`;
const turnIdOf = (i: number) => `bu-${String(i).padStart(7, '0')}`;

const STATES: ReadonlyArray<[string, number]> = [
  ['RUNNING', 55],
  ['WAITING_FOR_INPUT', 10],
  ['IDLE', 20],
  ['COMPLETED', 15],
];
const SPECIALS: ReadonlyArray<[PendingAction | null, number]> = [
  ['clarification', 20],
  ['permission', 15],
  [null, 65],
];
// "Most need repair": a boot after a long outage, or the first boot against an existing database.
const SUMMARY_KINDS: ReadonlyArray<['missing' | 'stale' | 'correct', number]> = [
  ['missing', 70],
  ['stale', 15],
  ['correct', 15],
];

export interface TaskBatch {
  tasks: Row[];
  task_sessions: Row[];
  task_session_turns: Row[];
  task_session_messages: Row[];
  task_status_summaries: Row[];
  /** Tasks whose stored summary a reconcile must repair. */
  drift: number;
  /** Session of each toggle task, by task id. */
  sessionOf: Array<[string, string]>;
}

function planTask(batch: TaskBatch, i: number, toggle: boolean): void {
  const rng = createRng(0xbe7c ^ Math.imul(i + 1, 0x9e3779b1));
  const taskId = taskIdOf(i);
  const sessionId = sessionIdOf(i);
  const turnId = turnIdOf(i);
  const workspaceId = `ws-${i % WORKSPACES}`;
  const start = BASE_MICROS + i * 1_000_000;
  const at = (offsetMicros: number) => microsToTimestamp(start + offsetMicros);
  const state = toggle ? 'RUNNING' : pick(rng, STATES);
  const special = toggle ? 'clarification' : pick(rng, SPECIALS);
  if (toggle) batch.sessionOf.push([taskId, sessionId]);

  batch.tasks.push({
    id: taskId,
    workspace_id: workspaceId,
    title: `Benchmark task ${i}`,
    state: 'IN_PROGRESS',
    metadata: '{}',
    created_at: at(0),
    updated_at: at(0),
  });
  batch.task_sessions.push({
    id: sessionId,
    task_id: taskId,
    state,
    metadata: '{}',
    name: '',
    is_primary: 1,
    started_at: at(1000),
    completed_at: state === 'COMPLETED' ? at(9000) : null,
    updated_at: at(9000),
  });
  batch.task_session_turns.push({
    id: turnId,
    task_session_id: sessionId,
    task_id: taskId,
    started_at: at(2000),
    completed_at: null,
    metadata: '{}',
    created_at: at(2000),
    updated_at: at(2000),
  });
  const message = (k: number, type: string, authorType: string, content: string, requestsInput: boolean, metadata: Record<string, unknown>): Row => ({
    id: `bm-${String(i).padStart(7, '0')}-${k}`,
    task_session_id: sessionId,
    task_id: taskId,
    turn_id: turnId,
    author_type: authorType,
    author_id: authorType === 'user' ? 'user-1' : 'agent-claude',
    content,
    requests_input: requestsInput ? 1 : 0,
    type,
    metadata: JSON.stringify(metadata),
    created_at: at(3000 + k * 1000),
    updated_at: at(3000 + k * 1000),
    prompt_seq: 0,
  });
  batch.task_session_messages.push(message(0, 'message', 'user', 'Please fix the failing test.', false, {}));
  if (special === 'clarification') {
    batch.task_session_messages.push(
      message(1, 'clarification_request', 'agent', 'Which option?', true, {
        pending_id: `bp-${i}`,
        question_id: 'q1',
        question: { id: 'q1', title: 'Question', prompt: 'Which option?', options: [{ option_id: 'a', label: 'A', description: '' }] },
        question_index: 0,
        question_total: 1,
        status: 'pending',
      }),
    );
  } else if (special === 'permission') {
    batch.task_session_messages.push(
      message(1, 'permission_request', 'agent', 'Allow command?', true, {
        pending_id: `bp-${i}`,
        tool_call_id: `tc-${i}`,
        action_type: 'bash',
        status: 'pending',
      }),
    );
  }

  const derived: PendingAction | null = isInputCapableSessionState(state) ? special : null;
  const kind = toggle ? 'missing' : pick(rng, SUMMARY_KINDS);
  if (kind === 'missing') {
    batch.drift++;
    return;
  }
  const stored: PendingAction | null = kind === 'correct' ? derived : derived === null ? 'permission' : null;
  if (kind === 'stale') batch.drift++;
  batch.task_status_summaries.push({
    task_id: taskId,
    workspace_id: workspaceId,
    revision: 1,
    summary: canonicalSummaryJson(withPendingAction({}, stored)),
    updated_at: at(10_000),
  });
}

/** The rows of tasks [start, end); those below `toggleBelow` get the toggle shape, with no summary yet. */
export function planTasks(start: number, end: number, toggleBelow: number): TaskBatch {
  const batch: TaskBatch = {
    tasks: [],
    task_sessions: [],
    task_session_turns: [],
    task_session_messages: [],
    task_status_summaries: [],
    drift: 0,
    sessionOf: [],
  };
  for (let i = start; i < end; i++) planTask(batch, i, i < toggleBelow);
  return batch;
}
