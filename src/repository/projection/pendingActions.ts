import { rawRows, type RepositoryContext } from '../context.js';
import { currentTurnAuthority } from '../turns/currentTurnAuthority.js';
import type { SqlDialect, SqlFragment } from '../dialect.js';
import { isInputCapableSessionState, taskPendingAction, type PendingAction } from '../../turns/pendingAction.js';
import { CLARIFICATION_TYPE, PERMISSION_TYPE, TERMINAL_STATES_SQL, pendingStatusPredicate } from '../clarifications/clarificationSql.js';
import { waitingQueuedPromptsOfSession } from '../prompts/queuedPrompts.js';
import type { QueuedPromptTables } from '../schema/queueTables.js';

/**
 * The windowed pending-action statement for `sessionIds`, exactly as `getPendingActionsBySessionIds`
 * runs it: one row per (session, action) found, clarification and permission rows side by side.
 * Exported so benchmarks and plan inspections (`EXPLAIN`) see the very statement production runs.
 */
export function pendingActionsStatement(dialect: SqlDialect, sessionIds: readonly string[]): SqlFragment {
  const authority = currentTurnAuthority(dialect, 't');
  const members = dialect.inList('s.id', sessionIds);
  // One statement for any number of sessions, so the cost does not grow per session: the window ranks every session's turns
  // in a single pass instead of one current-turn subquery per session.
  // The sessions are filtered before their turns are read: joined per turn instead, SQLite looked
  // each session up once for every one of its turns, a fifth of the statement's time (bench:queries).
  // CROSS JOIN pins the join order on SQLite (its documented planner control; PostgreSQL plans it as
  // the inner join it is), so the current turns drive probes of pp_messages_turn_type. Left free,
  // SQLite fed the permission window by scanning every message of the database in session order:
  // 0.2 s per call on 500k messages, for one session as for ten thousand (bench:queries).
  const sql = `
    WITH ranked AS (
      SELECT t.task_session_id, t.id AS turn_id,
             ROW_NUMBER() OVER (PARTITION BY t.task_session_id ORDER BY ${authority.orderBy}) AS rn
        FROM task_session_turns t
       WHERE t.task_session_id IN (
               SELECT s.id FROM task_sessions s WHERE ${members.sql} AND s.state NOT IN ${TERMINAL_STATES_SQL}
             )
         AND ${authority.predicate}
    ),
    current_turn AS (SELECT task_session_id, turn_id FROM ranked WHERE rn = 1),
    pending_clarifications AS (
      SELECT DISTINCT ct.task_session_id
        FROM current_turn ct
        CROSS JOIN task_session_messages m
       WHERE m.turn_id = ct.turn_id AND m.task_session_id = ct.task_session_id
         AND m.type = '${CLARIFICATION_TYPE}' AND ${pendingStatusPredicate(dialect, 'm.metadata')}
    ),
    latest_permissions AS (
      SELECT m.task_session_id, m.metadata,
             ROW_NUMBER() OVER (PARTITION BY m.task_session_id ORDER BY ${dialect.timestampKey('m.created_at')} DESC, ${dialect.binaryText('m.id')} DESC) AS rn
        FROM current_turn ct
        CROSS JOIN task_session_messages m
       WHERE m.turn_id = ct.turn_id AND m.task_session_id = ct.task_session_id
         AND m.type = '${PERMISSION_TYPE}'
    )
    SELECT task_session_id, 'clarification' AS pending_action FROM pending_clarifications
    UNION ALL
    SELECT task_session_id, 'permission' AS pending_action FROM latest_permissions
     WHERE rn = 1 AND ${pendingStatusPredicate(dialect, 'metadata')}`;
  return { sql, bindings: members.bindings };
}

/**
 * Per-session pending action for many sessions in one statement. Clarification beats permission
 * within a session; only the newest permission row of the current turn counts; terminal sessions
 * and sessions without a current turn have none (absent from the map).
 */
export async function getPendingActionsBySessionIds(ctx: RepositoryContext, sessionIds: readonly string[]): Promise<Map<string, PendingAction>> {
  const result = new Map<string, PendingAction>();
  if (sessionIds.length === 0) return result;
  const { sql, bindings } = pendingActionsStatement(ctx.dialect, sessionIds);
  const rows = await rawRows<{ task_session_id: string; pending_action: PendingAction }>(ctx, sql, bindings);
  for (const row of rows) {
    if (row.pending_action === 'clarification' || !result.has(row.task_session_id)) {
      result.set(row.task_session_id, row.pending_action);
    }
  }
  return result;
}

interface SessionPendingState {
  sessionId: string;
  taskId: string;
  state: string;
  isPrimary: boolean;
  /** Set only for input-capable sessions, as Kandev's session DTO does. */
  pendingAction: PendingAction | null;
}

export interface TaskPendingState {
  taskId: string;
  workspaceId: string;
  sessions: SessionPendingState[];
  pendingAction: PendingAction | null;
  /**
   * The summary's `queued_prompt_count` (queuedPrompts.ts: waiting queued prompts of every session),
   * read when the caller named the queue tables; undefined when it did not (not read, not 0).
   */
  queuedPromptCount?: number;
}

/**
 * The authoritative pending state of many tasks: two statements whatever the batch size (sessions,
 * then the windowed per-session query over the input-capable ones). When `queue` names where the
 * queued prompts are, the first one also counts each session's waiting queued prompts. Unknown task
 * ids are absent.
 */
export async function loadTaskPendingStates(
  ctx: RepositoryContext,
  taskIds: readonly string[],
  queue?: QueuedPromptTables,
): Promise<Map<string, TaskPendingState>> {
  const states = new Map<string, TaskPendingState>();
  if (taskIds.length === 0) return states;
  const members = ctx.dialect.inList('t.id', taskIds);
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT t.id AS task_id, t.workspace_id, s.id AS session_id, s.state, s.is_primary${queue ? `, ${waitingQueuedPromptsOfSession(ctx.dialect, queue, 's.id')} AS queued_prompts` : ''}
       FROM tasks t LEFT JOIN task_sessions s ON s.task_id = t.id
      WHERE ${members.sql}
      ORDER BY t.id, ${ctx.dialect.timestampKey('s.started_at')}, s.id`,
    members.bindings,
  );
  const capable: string[] = [];
  for (const row of rows) {
    const taskId = String(row.task_id);
    let state = states.get(taskId);
    if (!state) {
      state = { taskId, workspaceId: String(row.workspace_id ?? ''), sessions: [], pendingAction: null, ...(queue ? { queuedPromptCount: 0 } : {}) };
      states.set(taskId, state);
    }
    if (row.session_id === null || row.session_id === undefined) continue;
    if (queue) state.queuedPromptCount = (state.queuedPromptCount ?? 0) + Number(row.queued_prompts ?? 0);
    const session: SessionPendingState = {
      sessionId: String(row.session_id),
      taskId,
      state: String(row.state),
      isPrimary: Number(row.is_primary) === 1,
      pendingAction: null,
    };
    state.sessions.push(session);
    if (isInputCapableSessionState(session.state)) capable.push(session.sessionId);
  }
  const actions = await getPendingActionsBySessionIds(ctx, capable);
  for (const state of states.values()) {
    for (const session of state.sessions) {
      if (isInputCapableSessionState(session.state)) session.pendingAction = actions.get(session.sessionId) ?? null;
    }
    state.pendingAction = taskPendingAction(state.sessions);
  }
  return states;
}

export async function loadTaskPendingState(ctx: RepositoryContext, taskId: string): Promise<TaskPendingState | undefined> {
  return (await loadTaskPendingStates(ctx, [taskId])).get(taskId);
}
