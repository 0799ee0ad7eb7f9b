/**
 * The benchmarks' seeder: bulk rows from a pure plan (sessionPlan.ts for the query benchmark,
 * taskPlan.ts for the worker benchmark), committed in large transactions of multi-row INSERTs, then
 * ANALYZE; and the bulk changes the worker benchmark makes between its phases. Tests that need a
 * few rows written the way Kandev writes them use fixtures.ts instead.
 */
import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import type { RepositoryContext } from '../../src/repository/context.js';
import type { PendingAction } from '../../src/turns/pendingAction.js';
import { insertRows, type Row } from './bulkInsert.js';
import { MESSAGES_PER_SESSION, TURNS_PER_SESSION, planBatch, type TailShape } from './sessionPlan.js';
import { planTasks } from './taskPlan.js';

/** Tables in insertion order (parents first). */
const SEED_TABLES = ['tasks', 'task_sessions', 'task_session_turns', 'task_session_messages', 'task_status_summaries'] as const;
type SeedTables = Record<(typeof SEED_TABLES)[number], Row[]>;

/**
 * Inserts `plan(start, end)` for consecutive ranges of `perTransaction` items of [from, to), one
 * transaction per range, then runs ANALYZE. Resolves to the time each took.
 */
async function seedInTransactions<B extends SeedTables>(
  ctx: RepositoryContext,
  range: { from: number; to: number; perTransaction: number },
  plan: (start: number, end: number) => B,
  onCommitted: (batch: B, end: number) => void,
): Promise<{ seedMs: number; analyzeMs: number }> {
  const dialect = ctx.dialect.name;
  const knex = ctx.knex as Knex;
  const started = performance.now();
  // The default 2 MB page cache makes inserts into random-key indexes thrash; seeding gets a large
  // one, measurements run with the default the application uses.
  if (dialect === 'sqlite') await knex.raw('PRAGMA cache_size = -1048576');
  try {
    for (let start = range.from; start < range.to; start += range.perTransaction) {
      const end = Math.min(range.to, start + range.perTransaction);
      const batch = plan(start, end);
      await knex.transaction(async (trx) => {
        for (const table of SEED_TABLES) await insertRows(trx, dialect, table, batch[table]);
      });
      onCommitted(batch, end);
    }
  } finally {
    if (dialect === 'sqlite') await knex.raw('PRAGMA cache_size = -2000');
  }
  const seedMs = performance.now() - started;
  // PostgreSQL: only this schema's tables; a bare ANALYZE would walk other engineers' schemas too.
  await knex.raw(dialect === 'sqlite' ? 'ANALYZE' : `ANALYZE ${SEED_TABLES.join(', ')}`);
  return { seedMs, analyzeMs: performance.now() - started - seedMs };
}

export interface SeedTasksOptions {
  tasks: number;
  /** Index of the first task (a later seeding appends after an earlier one). */
  from?: number;
  /** Tasks with an index below this get the toggle shape (and no summary row yet). */
  toggleBelow: number;
  onProgress?: (done: number) => void;
}

export interface SeededTasks {
  taskIds: string[];
  /** Session of each toggle task, by task id. */
  sessionOf: Map<string, string>;
  /** Tasks reconcile must repair (summary missing, stale or pointing at another pending action). */
  expectedDrift: number;
  rows: { tasks: number; sessions: number; turns: number; messages: number; summaries: number };
  seedMs: number;
}

const TASKS_PER_TRANSACTION = 5000;

/** Seeds the worker benchmark's tasks (taskPlan.ts). */
export async function seedTasks(ctx: RepositoryContext, options: SeedTasksOptions): Promise<SeededTasks> {
  const from = options.from ?? 0;
  const result: SeededTasks = {
    taskIds: [],
    sessionOf: new Map(),
    expectedDrift: 0,
    rows: { tasks: 0, sessions: 0, turns: 0, messages: 0, summaries: 0 },
    seedMs: 0,
  };
  const { seedMs } = await seedInTransactions(
    ctx,
    { from, to: from + options.tasks, perTransaction: TASKS_PER_TRANSACTION },
    (start, end) => planTasks(start, end, options.toggleBelow),
    (batch, end) => {
      for (const row of batch.tasks) result.taskIds.push(String(row.id));
      for (const [taskId, sessionId] of batch.sessionOf) result.sessionOf.set(taskId, sessionId);
      result.expectedDrift += batch.drift;
      result.rows.tasks += batch.tasks.length;
      result.rows.sessions += batch.task_sessions.length;
      result.rows.turns += batch.task_session_turns.length;
      result.rows.messages += batch.task_session_messages.length;
      result.rows.summaries += batch.task_status_summaries.length;
      options.onProgress?.(end - from);
    },
  );
  result.seedMs = seedMs;
  return result;
}

export interface SeededSessions {
  /** Every session, in seeding order. */
  sessionIds: string[];
  /** The pending action each session must resolve to, from the independent model in sessionPlan.ts. */
  expected: Map<string, PendingAction>;
  tails: Map<TailShape, number>;
  seedMs: number;
  analyzeMs: number;
}

// Random-key indexes dirty pages all over the file; fewer commits write each page to the WAL fewer times.
const SESSIONS_PER_TRANSACTION = 1000;

/** Seeds the query benchmark's sessions (sessionPlan.ts), reporting every tenth of the way on `progress`. */
export async function seedSessions(ctx: RepositoryContext, sessions: number, progress: (line: string) => void): Promise<SeededSessions> {
  const label = `[${ctx.dialect.name}]`;
  const result: SeededSessions = { sessionIds: [], expected: new Map(), tails: new Map(), seedMs: 0, analyzeMs: 0 };
  progress(`${label} seeding ${sessions} sessions (${sessions * TURNS_PER_SESSION} turns, ${sessions * MESSAGES_PER_SESSION} messages)`);
  const started = performance.now();
  let nextReport = 0.1;
  const times = await seedInTransactions(
    ctx,
    { from: 0, to: sessions, perTransaction: SESSIONS_PER_TRANSACTION },
    (start, end) => {
      const batch = planBatch(start, end - start);
      return {
        tasks: batch.tasks,
        task_sessions: batch.sessions,
        task_session_turns: batch.turns,
        task_session_messages: batch.messages,
        task_status_summaries: [],
        batch,
      };
    },
    ({ batch }, done) => {
      result.sessionIds.push(...batch.sessionIds);
      for (const [id, action] of batch.expected) result.expected.set(id, action);
      for (const [tail, n] of batch.tails) result.tails.set(tail, (result.tails.get(tail) ?? 0) + n);
      if (done / sessions >= nextReport - 1e-9 || done === sessions) {
        progress(
          `${label}   ${done}/${sessions} sessions (${Math.round((done / sessions) * 100)}%) after ${((performance.now() - started) / 1000).toFixed(1)}s`,
        );
        while (nextReport <= done / sessions + 1e-9) nextReport += 0.1;
      }
    },
  );
  Object.assign(result, times);
  return result;
}

/**
 * Flips each listed toggle task's session between RUNNING and IDLE in one statement per chunk, so
 * every listed task's pending action differs from its stored summary afterwards.
 */
export async function toggleTasks(ctx: RepositoryContext, taskIds: readonly string[], now: string): Promise<void> {
  for (let i = 0; i < taskIds.length; i += 5000) {
    const members = ctx.dialect.inList('task_id', taskIds.slice(i, i + 5000));
    await ctx.knex.raw(`UPDATE task_sessions SET state = CASE WHEN state = 'RUNNING' THEN 'IDLE' ELSE 'RUNNING' END, updated_at = ? WHERE ${members.sql}`, [
      now,
      ...members.bindings,
    ] as Knex.RawBinding[]);
  }
}

/** The state of each listed task's session, as the last toggle left it (what Kandev's state event carries). */
export async function sessionStatesOf(ctx: RepositoryContext, taskIds: readonly string[]): Promise<Map<string, string>> {
  const states = new Map<string, string>();
  for (let i = 0; i < taskIds.length; i += 5000) {
    const rows: Array<{ task_id: string; state: string }> = await ctx
      .knex('task_sessions')
      .select('task_id', 'state')
      .whereIn('task_id', taskIds.slice(i, i + 5000));
    for (const row of rows) states.set(row.task_id, row.state);
  }
  return states;
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
  await ctx.knex.raw(`VACUUM (ANALYZE) ${SEED_TABLES.join(', ')}`);
  await ctx.knex.raw('CHECKPOINT');
}

/**
 * What a worker outage leaves behind, on every `step`-th task: a toggle task's session changed
 * state (its summary is now stale), any other task was created meanwhile (no summary row yet).
 * Resolves to how many tasks now need repair.
 */
export async function driftLikeAnOutage(
  ctx: RepositoryContext,
  taskIds: readonly string[],
  toggleTaskCount: number,
  step: number,
  now: string,
): Promise<number> {
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
