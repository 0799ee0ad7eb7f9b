import { rawRows, storedNow, beginOrJoin, type RepositoryContext } from '../context.js';
import { currentTurnAuthority, currentTurnIdSubquery } from '../turns/currentTurnAuthority.js';
import {
  CLARIFICATION_TYPE,
  KNOWN_CLARIFICATION_STATUSES,
  isPending,
  nonTerminalSession,
  pendingIdOf,
  questionIdOf,
  wellFormedBundle,
} from './clarificationSql.js';
import { toMessageRecord, type MessageRecord } from '../rowMapping.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import { readStoredTimestamp, toCanonicalTimestamp } from '../../timestamps.js';
import { questionIdFromMetadata } from '../../turns/clarificationQuestionId.js';
import { isTruthyFlag } from '../../turns/lifecycleTurn.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';
import { idProblem } from '../../storableText.js';

/**
 * Reads and session-wide writes of clarification rows. A clarification is a bundle of
 * `clarification_request` messages sharing `metadata.pending_id`; it is operational only while its
 * rows sit on the session's current turn (ADR 0001).
 */

type Row = Record<string, unknown>;

/**
 * Pending (or status-less) clarification rows on the session's current turn, detached or not,
 * oldest first. The workflow guard and expiry discovery read this. Scoped to the session twice so a
 * malformed cross-session turn_id cannot leak rows.
 */
export async function findActiveClarificationMessages(ctx: RepositoryContext, sessionId: string): Promise<MessageRecord[]> {
  const authority = currentTurnAuthority(ctx.dialect, 't');
  const rows = await rawRows<Row>(
    ctx,
    `WITH current_turn AS (
       SELECT t.id FROM task_session_turns t
        WHERE t.task_session_id = ? AND ${authority.predicate}
        ORDER BY ${authority.orderBy} LIMIT 1
     )
     SELECT m.* FROM task_session_messages m JOIN current_turn c ON m.turn_id = c.id
      WHERE m.task_session_id = ? AND m.type = '${CLARIFICATION_TYPE}' AND ${isPending(ctx.dialect, 'm')}
      ORDER BY ${ctx.dialect.timestampKey('m.created_at')} ASC, m.id ASC`,
    [sessionId, sessionId],
  );
  return rows.map(toMessageRecord);
}

async function updateCurrentTurnPendingRows(
  ctx: RepositoryContext,
  sessionId: string,
  set: Record<string, unknown>,
  extraWhere: string,
  extraBindings: unknown[],
): Promise<MessageRecord[]> {
  return beginOrJoin(ctx, async (tx) => {
    await lockSessionTurnWrites(tx, [sessionId]);
    const d = tx.dialect;
    const patch = d.jsonPatch('metadata', set);
    const rows = await rawRows<Row>(
      tx,
      `UPDATE task_session_messages AS m SET metadata = ${patch.sql}, updated_at = ?
        WHERE m.task_session_id = ? AND m.type = '${CLARIFICATION_TYPE}' AND ${isPending(d, 'm')}
          AND m.turn_id = ${currentTurnIdSubquery(d, 'm.task_session_id')}
          ${extraWhere}
        RETURNING *`,
      [...patch.bindings, storedNow(tx), sessionId, ...extraBindings],
    );
    return rows.map(toMessageRecord).sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  });
}

/**
 * Marks current-turn pending rows `agent_disconnected: true`. They stay answerable while their turn
 * is current. Rows already detached are not touched, so a repeat writes and returns nothing.
 */
export function detachActiveClarifications(ctx: RepositoryContext, sessionId: string): Promise<MessageRecord[]> {
  return updateCurrentTurnPendingRows(ctx, sessionId, { agent_disconnected: true }, `AND NOT ${ctx.dialect.jsonFlag('m.metadata', 'agent_disconnected')}`, []);
}

/** Expires the pending rows of one current-turn bundle (session going terminal). */
export function expireActiveClarificationBundle(ctx: RepositoryContext, sessionId: string, pendingId: string): Promise<MessageRecord[]> {
  return updateCurrentTurnPendingRows(ctx, sessionId, { agent_disconnected: true, status: 'expired' }, `AND ${pendingIdOf(ctx.dialect, 'm')} = ?`, [pendingId]);
}

/** Every row carrying `pendingId`, on any turn or session (identity lookup; not authority). */
export async function findMessagesByPendingId(ctx: RepositoryContext, pendingId: string): Promise<MessageRecord[]> {
  const rows = await rawRows<Row>(
    ctx,
    `SELECT m.* FROM task_session_messages m WHERE ${pendingIdOf(ctx.dialect, 'm')} = ? ORDER BY ${ctx.dialect.timestampKey('m.created_at')} ASC, m.id ASC`,
    [pendingId],
  );
  return rows.map(toMessageRecord);
}

export interface ListBundlesOptions {
  workspaceId?: string;
  /** Only bundles whose first row was created at or after this instant. */
  createdSince?: string;
  limit: number;
  /** Opaque cursor from a previous page's `nextCursor`. */
  cursor?: string;
}

interface BundleQuestion {
  messageId: string;
  questionId: string;
  question: unknown;
  status: string;
  agentDisconnected: boolean;
}

export interface UnresolvedBundle {
  pendingId: string;
  sessionId: string;
  taskId: string;
  workspaceId: string;
  turnId: string;
  createdAt: string;
  context: string;
  questions: BundleQuestion[];
}

export interface BundlePage {
  bundles: UnresolvedBundle[];
  nextCursor: string | null;
}

export class InvalidCursorError extends PendingProjectorError {
  override name = 'InvalidCursorError';
  constructor(message: string) {
    super(ERROR_CODES.INVALID_CURSOR, message);
  }
}

function encodeCursor(createdAt: string, pendingId: string): string {
  return Buffer.from(JSON.stringify([createdAt, pendingId])).toString('base64url');
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string' && !idProblem(value[1])) {
      return [toCanonicalTimestamp(value[0]), value[1]];
    }
  } catch {
    // fall through to the error below
  }
  throw new InvalidCursorError('cursor is not one this service issued');
}

/**
 * Unresolved clarification bundles: grouped by (pending_id, session), at least one pending row, every
 * row with a question id and a known status, on the current turn of a non-terminal session, not part
 * of the parent-question protocol, and well-formed (a bundle the claim would refuse is never offered
 * for answering). Ordered by (first row created_at, pending_id); a page is
 * filled to `limit` when more bundles exist, because every filter runs before the LIMIT.
 */
export async function listUnresolvedClarificationBundles(ctx: RepositoryContext, options: ListBundlesOptions): Promise<BundlePage> {
  const d = ctx.dialect;
  const pid = pendingIdOf(d, 'm');
  const status = d.jsonStringOrAbsent('m.metadata', 'status');
  const known = KNOWN_CLARIFICATION_STATUSES.map((s) => `'${s}'`).join(', ');
  const bindings: unknown[] = [];
  let scope = '';
  if (options.workspaceId !== undefined) {
    scope += ' AND tk.workspace_id = ?';
    bindings.push(options.workspaceId);
  }
  let page = '';
  if (options.createdSince !== undefined) {
    page += ' AND b.created_at >= ?';
    bindings.push(toCanonicalTimestamp(options.createdSince));
  }
  if (options.cursor !== undefined) {
    const [createdAt, pendingId] = decodeCursor(options.cursor);
    page += ` AND (b.created_at > ? OR (b.created_at = ? AND ${d.binaryText('b.pending_id')} > ?))`;
    bindings.push(createdAt, createdAt, pendingId);
  }
  bindings.push(options.limit + 1);
  const keys = await rawRows<Row>(
    ctx,
    `SELECT b.* FROM (
       SELECT ${pid} AS pending_id, m.task_session_id, MIN(tk.id) AS task_id, MIN(tk.workspace_id) AS workspace_id,
              MIN(m.turn_id) AS turn_id, MIN(${d.timestampKey('m.created_at')}) AS created_at,
              SUM(CASE WHEN ${isPending(d, 'm')} THEN 1 ELSE 0 END) AS pending_rows,
              SUM(CASE WHEN ${questionIdOf(d, 'm')} = '' THEN 1 ELSE 0 END) AS missing_question_ids,
              SUM(CASE WHEN ${status} IN (${known}) THEN 0 ELSE 1 END) AS unknown_statuses,
              SUM(CASE WHEN ${d.jsonFlag('m.metadata', 'parent_question')} THEN 1 ELSE 0 END) AS parent_rows
         FROM task_session_messages m
         JOIN task_sessions s ON s.id = m.task_session_id
         JOIN tasks tk ON tk.id = s.task_id
        WHERE m.type = '${CLARIFICATION_TYPE}' AND ${pid} <> ''
          AND ${nonTerminalSession('m')}
          AND ${wellFormedBundle(d, 'm')}
          AND m.turn_id = ${currentTurnIdSubquery(d, 'm.task_session_id')}
          ${scope}
        GROUP BY ${pid}, m.task_session_id
     ) b
     WHERE b.pending_rows > 0 AND b.missing_question_ids = 0 AND b.unknown_statuses = 0 AND b.parent_rows = 0 ${page}
     ORDER BY b.created_at ASC, ${d.binaryText('b.pending_id')} ASC
     LIMIT ?`,
    bindings,
  );
  const hasMore = keys.length > options.limit;
  const pageKeys = keys.slice(0, options.limit);
  const bundles = await loadBundleRows(ctx, pageKeys);
  const last = pageKeys[pageKeys.length - 1];
  return {
    bundles,
    nextCursor: hasMore && last ? encodeCursor(readStoredTimestamp(String(last.created_at)), String(last.pending_id)) : null,
  };
}

async function loadBundleRows(ctx: RepositoryContext, keys: Row[]): Promise<UnresolvedBundle[]> {
  if (keys.length === 0) return [];
  const ids = keys.map((k) => String(k.pending_id));
  const members = ctx.dialect.inList(pendingIdOf(ctx.dialect, 'm'), ids);
  const rows = (
    await rawRows<Row>(
      ctx,
      `SELECT m.* FROM task_session_messages m WHERE m.type = '${CLARIFICATION_TYPE}' AND ${members.sql}
        ORDER BY ${ctx.dialect.timestampKey('m.created_at')} ASC, m.id ASC`,
      members.bindings,
    )
  ).map(toMessageRecord);
  return keys.map((key) => {
    const own = rows.filter((r) => r.metadata.pending_id === key.pending_id && r.sessionId === key.task_session_id && r.turnId === key.turn_id);
    own.sort((a, b) => Number(a.metadata.question_index ?? 0) - Number(b.metadata.question_index ?? 0));
    return {
      pendingId: String(key.pending_id),
      sessionId: String(key.task_session_id),
      taskId: String(key.task_id),
      workspaceId: String(key.workspace_id),
      turnId: String(key.turn_id),
      createdAt: readStoredTimestamp(String(key.created_at)),
      context: typeof own[0]?.metadata.context === 'string' ? own[0].metadata.context : '',
      questions: own.map((r) => ({
        messageId: r.id,
        questionId: questionIdFromMetadata(r.metadata),
        question: r.metadata.question ?? null,
        status: typeof r.metadata.status === 'string' && r.metadata.status !== '' ? r.metadata.status : 'pending',
        agentDisconnected: isTruthyFlag(r.metadata.agent_disconnected),
      })),
    };
  });
}
