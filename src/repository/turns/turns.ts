import { randomUUID } from 'node:crypto';
import { rawRows, storedNow, beginOrJoin, type RepositoryContext } from '../context.js';
import { currentTurnAuthority, turnHistoryPredicate, TURN_META_LIFECYCLE_ONLY } from './currentTurnAuthority.js';
import { toTurnRecord, type TurnRecord } from '../rowMapping.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import { toCanonicalTimestamp } from '../../timestamps.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';

export class SessionNotFoundError extends PendingProjectorError {
  override name = 'SessionNotFoundError';
  constructor(readonly sessionId: string) {
    super(ERROR_CODES.SESSION_NOT_FOUND, `session ${sessionId} does not exist`);
  }
}

export interface StartTurnOptions {
  id?: string;
  /** Explicit start instant (tests and replays); defaults to the repository clock. */
  startedAt?: string;
  metadata?: Record<string, unknown>;
  /** The session's task, when the caller already read the session row in this transaction. */
  taskId?: string;
}

async function sessionTaskId(tx: RepositoryContext, sessionId: string): Promise<string> {
  const row = await tx.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
  if (!row) throw new SessionNotFoundError(sessionId);
  return String(row.task_id);
}

async function insertTurn(tx: RepositoryContext, sessionId: string, options: StartTurnOptions & { completed: boolean }): Promise<TurnRecord> {
  await lockSessionTurnWrites(tx, [sessionId]);
  const taskId = options.taskId ?? (await sessionTaskId(tx, sessionId));
  const now = storedNow(tx);
  const startedAt = options.startedAt ? tx.dialect.storedTimestamp(toCanonicalTimestamp(options.startedAt)) : now;
  const row = {
    id: options.id ?? randomUUID(),
    task_session_id: sessionId,
    task_id: taskId,
    started_at: startedAt,
    completed_at: options.completed ? startedAt : null,
    metadata: JSON.stringify(options.metadata ?? {}),
    created_at: now,
    updated_at: now,
  };
  await tx.knex('task_session_turns').insert(row);
  return toTurnRecord(row);
}

/** Opens a conversational turn. */
export function startTurn(ctx: RepositoryContext, sessionId: string, options: StartTurnOptions = {}): Promise<TurnRecord> {
  return beginOrJoin(ctx, (tx) => insertTurn(tx, sessionId, { ...options, completed: false }));
}

/**
 * Persists a lifecycle turn: born completed, and marked `lifecycle_only: true` in the same INSERT
 * (spec AC-1), so no reader can ever see it unmarked and no retry needs a dedupe (D7).
 */
export function createLifecycleTurn(ctx: RepositoryContext, sessionId: string, options: StartTurnOptions = {}): Promise<TurnRecord> {
  const metadata = { ...(options.metadata ?? {}), [TURN_META_LIFECYCLE_ONLY]: true };
  return beginOrJoin(ctx, (tx) => insertTurn(tx, sessionId, { ...options, metadata, completed: true }));
}

/** Completes an open turn; returns false if it was already completed or does not exist. */
export function completeTurn(ctx: RepositoryContext, turnId: string, completedAt?: string): Promise<boolean> {
  return beginOrJoin(ctx, async (tx) => {
    const turn = await tx.knex('task_session_turns').select('task_session_id').where({ id: turnId }).first();
    if (!turn) return false;
    await lockSessionTurnWrites(tx, [String(turn.task_session_id)]);
    const now = storedNow(tx);
    const changed = await tx
      .knex('task_session_turns')
      .where({ id: turnId })
      .whereNull('completed_at')
      .update({ completed_at: completedAt ? tx.dialect.storedTimestamp(toCanonicalTimestamp(completedAt)) : now, updated_at: now });
    return changed > 0;
  });
}

/**
 * "Is a turn running right now" (D10): the first open, authority-eligible turn. Keeps its own
 * `completed_at IS NULL`; the shared order still decides between two open turns (AC-8).
 */
export async function getActiveTurn(ctx: RepositoryContext, sessionId: string): Promise<TurnRecord | undefined> {
  const authority = currentTurnAuthority(ctx.dialect, 't');
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT t.* FROM task_session_turns t
      WHERE t.task_session_id = ? AND t.completed_at IS NULL AND ${authority.predicate}
      ORDER BY ${authority.orderBy} LIMIT 1`,
    [sessionId],
  );
  return rows[0] ? toTurnRecord(rows[0]) : undefined;
}

/** "Which turn owns this session's state": the current turn, or undefined when none resolves (D8). */
export async function getCurrentTurn(ctx: RepositoryContext, sessionId: string): Promise<TurnRecord | undefined> {
  const authority = currentTurnAuthority(ctx.dialect, 't');
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT t.* FROM task_session_turns t
      WHERE t.task_session_id = ? AND ${authority.predicate}
      ORDER BY ${authority.orderBy} LIMIT 1`,
    [sessionId],
  );
  return rows[0] ? toTurnRecord(rows[0]) : undefined;
}

/**
 * Visible turn history for UIs (Kandev's history predicate), oldest first, with each turn's
 * metadata (including `lifecycle_only`) so a client resolver can agree with the server (AC-11).
 */
export async function listVisibleTurns(ctx: RepositoryContext, sessionId: string): Promise<TurnRecord[]> {
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT t.* FROM task_session_turns t
      WHERE t.task_session_id = ? AND ${turnHistoryPredicate(ctx.dialect, 't')}
      ORDER BY ${ctx.dialect.timestampKey('t.started_at')} ASC, ${ctx.dialect.timestampKey('t.created_at')} ASC, t.id ASC`,
    [sessionId],
  );
  return rows.map(toTurnRecord);
}

/** Patches top-level turn metadata keys (reservation flags in tests and recovery paths). */
export function patchTurnMetadata(ctx: RepositoryContext, turnId: string, set: Record<string, unknown>): Promise<boolean> {
  return beginOrJoin(ctx, async (tx) => {
    const patch = tx.dialect.jsonPatch('metadata', set);
    const changed = await tx
      .knex('task_session_turns')
      .where({ id: turnId })
      .update({ metadata: tx.knex.raw(patch.sql, patch.bindings as never[]), updated_at: storedNow(tx) });
    return changed > 0;
  });
}
