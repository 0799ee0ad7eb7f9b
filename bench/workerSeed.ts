/**
 * Seeding for the worker benchmark (bench/worker.ts): many small tasks written with multi-row
 * INSERTs, in one of two shapes.
 *
 * - Toggle tasks (the first `toggleTasks` ids): one RUNNING session whose open turn holds a pending
 *   clarification, so flipping the session between RUNNING and IDLE flips the task's pending action
 *   between 'clarification' and none: one cheap UPDATE makes every listed task's summary stale.
 * - Mixed tasks (the rest): a session in a random state whose only turn may end with a pending
 *   clarification or permission, and a stored summary that is missing, stale or correct.
 *
 * Ids are zero-padded so keyset order is index order. Everything is deterministic (`createRng`), and
 * the expected drift of every task is computed from the planned rows alone, so the benchmark can
 * check reconcile's answer independently of the SQL.
 */
import type { Knex } from 'knex';
import { canonicalSummaryJson, withPendingAction } from '../src/events/statusSummary.js';
import type { RepositoryContext } from '../src/repository/context.js';
import type { DialectName } from '../src/repository/dialect.js';
import { microsToTimestamp } from '../src/timestamps.js';
import { isInputCapableSessionState, type PendingAction } from '../src/turns/pendingAction.js';
import { pick } from './seedMessages.js';
import { createRng, type Row } from './seedPlan.js';

export interface SeedOptions {
  tasks: number;
  /** The first `toggleTasks` tasks get the toggle shape (and no summary row). */
  toggleTasks: number;
  /** Tasks per transaction. */
  batchTasks?: number;
  onProgress?: (done: number) => void;
}

export interface SeedResult {
  taskIds: string[];
  /** Session of each toggle task, by task id. */
  sessionOf: Map<string, string>;
  /** Tasks reconcile must repair (summary missing, stale or pointing at another pending action). */
  expectedDrift: number;
  rows: { tasks: number; sessions: number; turns: number; messages: number; summaries: number };
}

// SQLite's SQLITE_MAX_VARIABLE_NUMBER is 32766; PostgreSQL's wire protocol caps a statement at 65535.
const MAX_BINDINGS: Record<DialectName, number> = { sqlite: 32_000, postgres: 65_000 };
const BASE_MICROS = Date.parse('2026-01-05T08:00:00Z') * 1000;
const WORKSPACES = 100;

export const taskIdOf = (i: number) => `bt-${String(i).padStart(7, '0')}`;
const sessionIdOf = (i: number) => `bs-${String(i).padStart(7, '0')}`;
const turnIdOf = (i: number) => `bu-${String(i).padStart(7, '0')}`;

/**
 * Multi-row `INSERT ... VALUES (...), (...)` under the dialect's binding limit (Knex would compile a
 * multi-row SQLite insert as a UNION ALL of SELECTs, capped at 500 terms).
 */
export async function insertRows(trx: Knex | Knex.Transaction, dialect: DialectName, table: string, rows: Row[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!);
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const head = `INSERT INTO ${table} (${columns.join(', ')}) VALUES `;
  const perStatement = Math.max(1, Math.floor(MAX_BINDINGS[dialect] / columns.length));
  for (let i = 0; i < rows.length; i += perStatement) {
    const chunk = rows.slice(i, i + perStatement);
    await trx.raw(head + chunk.map(() => tuple).join(', '), chunk.flatMap((row) => columns.map((c) => row[c] ?? null)));
  }
}

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

interface Batch {
  tasks: Row[];
  sessions: Row[];
  turns: Row[];
  messages: Row[];
  summaries: Row[];
  drift: number;
}

function planTask(batch: Batch, i: number, toggle: boolean, sessionOf: Map<string, string>): void {
  const rng = createRng(0xbe7c ^ Math.imul(i + 1, 0x9e3779b1));
  const taskId = taskIdOf(i);
  const sessionId = sessionIdOf(i);
  const turnId = turnIdOf(i);
  const workspaceId = `ws-${i % WORKSPACES}`;
  const start = BASE_MICROS + i * 1_000_000;
  const at = (offsetMicros: number) => microsToTimestamp(start + offsetMicros);
  const state = toggle ? 'RUNNING' : pick(rng, STATES);
  const special = toggle ? 'clarification' : pick(rng, SPECIALS);
  if (toggle) sessionOf.set(taskId, sessionId);

  batch.tasks.push({ id: taskId, workspace_id: workspaceId, title: `Benchmark task ${i}`, state: 'IN_PROGRESS', metadata: '{}', created_at: at(0), updated_at: at(0) });
  batch.sessions.push({
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
  batch.turns.push({ id: turnId, task_session_id: sessionId, task_id: taskId, started_at: at(2000), completed_at: null, metadata: '{}', created_at: at(2000), updated_at: at(2000) });
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
  batch.messages.push(message(0, 'message', 'user', 'Please fix the failing test.', false, {}));
  if (special === 'clarification') {
    batch.messages.push(
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
    batch.messages.push(message(1, 'permission_request', 'agent', 'Allow command?', true, { pending_id: `bp-${i}`, tool_call_id: `tc-${i}`, action_type: 'bash', status: 'pending' }));
  }

  const derived: PendingAction | null = isInputCapableSessionState(state) ? special : null;
  const kind = toggle ? 'missing' : pick(rng, SUMMARY_KINDS);
  if (kind === 'missing') {
    batch.drift++;
    return;
  }
  const stored: PendingAction | null = kind === 'correct' ? derived : derived === null ? 'permission' : null;
  if (kind === 'stale') batch.drift++;
  batch.summaries.push({ task_id: taskId, workspace_id: workspaceId, revision: 1, summary: canonicalSummaryJson(withPendingAction({}, stored)), updated_at: at(10_000) });
}

/** Seeds `options.tasks` tasks; the caller runs ANALYZE afterwards. */
export async function seedTasks(ctx: RepositoryContext, options: SeedOptions): Promise<SeedResult> {
  const dialect = ctx.dialect.name;
  const knex = ctx.knex as Knex;
  const batchTasks = options.batchTasks ?? 5000;
  const result: SeedResult = { taskIds: [], sessionOf: new Map(), expectedDrift: 0, rows: { tasks: 0, sessions: 0, turns: 0, messages: 0, summaries: 0 } };
  // A large page cache while seeding (as bench/queries.ts does); measurements use the default.
  if (dialect === 'sqlite') await knex.raw('PRAGMA cache_size = -262144');
  try {
    for (let start = 0; start < options.tasks; start += batchTasks) {
      const batch: Batch = { tasks: [], sessions: [], turns: [], messages: [], summaries: [], drift: 0 };
      const end = Math.min(options.tasks, start + batchTasks);
      for (let i = start; i < end; i++) planTask(batch, i, i < options.toggleTasks, result.sessionOf);
      await knex.transaction(async (trx) => {
        await insertRows(trx, dialect, 'tasks', batch.tasks);
        await insertRows(trx, dialect, 'task_sessions', batch.sessions);
        await insertRows(trx, dialect, 'task_session_turns', batch.turns);
        await insertRows(trx, dialect, 'task_session_messages', batch.messages);
        await insertRows(trx, dialect, 'task_status_summaries', batch.summaries);
      });
      for (const row of batch.tasks) result.taskIds.push(String(row.id));
      result.expectedDrift += batch.drift;
      result.rows.tasks += batch.tasks.length;
      result.rows.sessions += batch.sessions.length;
      result.rows.turns += batch.turns.length;
      result.rows.messages += batch.messages.length;
      result.rows.summaries += batch.summaries.length;
      options.onProgress?.(end);
    }
  } finally {
    if (dialect === 'sqlite') await knex.raw('PRAGMA cache_size = -2000');
  }
  // PostgreSQL: only this schema's tables; a bare ANALYZE would walk other engineers' schemas too.
  await knex.raw(dialect === 'sqlite' ? 'ANALYZE' : 'ANALYZE tasks, task_sessions, task_session_turns, task_session_messages, task_status_summaries');
  return result;
}

/**
 * Flips each listed toggle task's session between RUNNING and IDLE in one statement per chunk, so
 * every listed task's pending action differs from its stored summary afterwards.
 */
export async function toggleTasks(ctx: RepositoryContext, taskIds: readonly string[], now: string): Promise<void> {
  for (let i = 0; i < taskIds.length; i += 5000) {
    const members = ctx.dialect.inList('task_id', taskIds.slice(i, i + 5000));
    await ctx.knex.raw(
      `UPDATE task_sessions SET state = CASE WHEN state = 'RUNNING' THEN 'IDLE' ELSE 'RUNNING' END, updated_at = ? WHERE ${members.sql}`,
      [now, ...members.bindings] as Knex.RawBinding[],
    );
  }
}

/**
 * What pgbench does before it measures: vacuum and analyze what the seed and the boot reconcile
 * wrote, and checkpoint, so the measured phases neither read dead row versions a production
 * autovacuum would have cleared nor compete with the flush of the seed's dirty pages (the machine's
 * PostgreSQL runs with autovacuum off). SQLite: fold the WAL back into the database file.
 */
export async function settleAfterBulkWrites(ctx: RepositoryContext): Promise<void> {
  if (ctx.dialect.name === 'sqlite') {
    await ctx.knex.raw('PRAGMA wal_checkpoint(TRUNCATE)');
    return;
  }
  await ctx.knex.raw('VACUUM (ANALYZE) tasks, task_sessions, task_session_turns, task_session_messages, task_status_summaries');
  await ctx.knex.raw('CHECKPOINT');
}

/**
 * What a worker outage leaves behind, on every `step`-th task: a toggle task's session changed
 * state (its summary is now stale), any other task was created meanwhile (no summary row yet).
 * Resolves to how many tasks now need repair.
 */
export async function driftLikeAnOutage(ctx: RepositoryContext, taskIds: readonly string[], toggleTaskCount: number, step: number, now: string): Promise<number> {
  const changed: string[] = [];
  const created: string[] = [];
  for (let i = step - 1; i < taskIds.length; i += step) (i < toggleTaskCount ? changed : created).push(taskIds[i]!);
  await toggleTasks(ctx, changed, now);
  for (let i = 0; i < created.length; i += 5000) {
    const members = ctx.dialect.inList('task_id', created.slice(i, i + 5000));
    await ctx.knex.raw(`DELETE FROM task_status_summaries WHERE ${members.sql}`, members.bindings as Knex.RawBinding[]);
  }
  return changed.length + created.length;
}
