import { rawRows, storedNow, beginOrJoin, type RepositoryContext } from '../context.js';
import { currentTurnIdSubquery } from '../turns/currentTurnAuthority.js';
import { CLARIFICATION_TYPE, isPending, nonTerminalSession, pendingIdOf, statusIs, wellFormedBundle } from './clarificationSql.js';
import { toMessageRecord, type MessageRecord } from '../rowMapping.js';
import { lockSessionRows, lockSessionTurnWrites } from '../sessionLocks.js';
import { questionIdFromMetadata } from '../../turns/clarificationQuestionId.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';

/**
 * The exclusive claim, its finalisation and its restore (ADR 0001 "Response handling"). A claim
 * commits before any delivery; a failed delivery restores exactly the rows that claim took, only
 * while their turn is still current and the session non-terminal.
 */

type Row = Record<string, unknown>;

export type TerminalOutcome = 'answered' | 'rejected';

interface ClarificationAnswer {
  question_id: string;
  selected_options: string[];
  custom_text: string;
}

export type ClaimOutcome = { status: 'answered'; answers: ReadonlyMap<string, ClarificationAnswer> } | { status: 'rejected'; reason?: string };

export type ClaimResult = { claimed: true; rows: MessageRecord[] } | { claimed: false; reason: 'NOT_CLAIMABLE' };

export class ClaimIntegrityError extends PendingProjectorError {
  override name = 'ClaimIntegrityError';
  constructor(message: string) {
    super(ERROR_CODES.CLAIM_INTEGRITY, message);
  }
}

async function lockBundle(tx: RepositoryContext, pendingId: string): Promise<void> {
  if (tx.dialect.singleWriter) return;
  const sessions = await rawRows<{ task_session_id: string }>(
    tx,
    `SELECT DISTINCT m.task_session_id FROM task_session_messages m WHERE ${pendingIdOf(tx.dialect, 'm')} = ?`,
    [pendingId],
  );
  const ids = sessions.map((s) => s.task_session_id);
  await lockSessionTurnWrites(tx, ids);
  await lockSessionRows(tx, ids);
}

function ownedByCurrentTurn(tx: RepositoryContext): string {
  return (
    `m.type = '${CLARIFICATION_TYPE}' AND ${nonTerminalSession('m')} ` +
    `AND m.turn_id = ${currentTurnIdSubquery(tx.dialect, 'm.task_session_id')} AND ${wellFormedBundle(tx.dialect, 'm')}`
  );
}

/**
 * Atomically claims the pending rows of a current-turn bundle and records the outcome on them,
 * marked `response_delivery_pending` until delivery is finalised. Terminal siblings are untouched.
 * Returns `claimed: false` (no write) when nothing is claimable: lost race, superseded turn, terminal
 * session, expired, cancelled or malformed bundle.
 */
export function claimClarificationBundle(ctx: RepositoryContext, pendingId: string, outcome: ClaimOutcome): Promise<ClaimResult> {
  return beginOrJoin(ctx, async (tx) => {
    await lockBundle(tx, pendingId);
    const d = tx.dialect;
    const claim = d.jsonPatch('metadata', { status: 'responding' });
    const claimed = await rawRows<Row>(
      tx,
      `UPDATE task_session_messages AS m SET metadata = ${claim.sql}, updated_at = ?
        WHERE ${pendingIdOf(d, 'm')} = ? AND ${isPending(d, 'm')} AND ${ownedByCurrentTurn(tx)}
        RETURNING id`,
      [...claim.bindings, storedNow(tx), pendingId],
    );
    if (claimed.length === 0) return { claimed: false, reason: 'NOT_CLAIMABLE' };
    const rows = (await loadClaimedRows(tx, pendingId)).filter((r) => claimed.some((c) => c.id === r.id));
    if (rows.length !== claimed.length) throw new ClaimIntegrityError(`claimed ${claimed.length} rows of ${pendingId} but loaded ${rows.length}`);
    const now = storedNow(tx);
    const finished: MessageRecord[] = [];
    for (const row of rows) {
      const set: Record<string, unknown> = { status: outcome.status, response_delivery_pending: true };
      if (outcome.status === 'answered') {
        const questionId = questionIdFromMetadata(row.metadata);
        const answer = outcome.answers.get(questionId);
        if (!answer) throw new ClaimIntegrityError(`no answer for question ${JSON.stringify(questionId)} of bundle ${pendingId}`);
        set.response = answer;
      } else if (outcome.reason !== undefined) {
        set.reject_reason = outcome.reason;
      }
      const patch = d.jsonPatch('metadata', set);
      const updated = await rawRows<Row>(
        tx,
        `UPDATE task_session_messages AS m SET metadata = ${patch.sql}, updated_at = ?
          WHERE m.id = ? AND ${statusIs(d, 'm', 'responding')} RETURNING *`,
        [...patch.bindings, now, row.id],
      );
      if (updated.length !== 1) throw new ClaimIntegrityError(`row ${row.id} lost its claim`);
      finished.push(toMessageRecord(updated[0]!));
    }
    return { claimed: true, rows: finished };
  });
}

/** Rows of the bundle held in `responding` on the current turn (the rows a claim just took). */
async function loadClaimedRows(tx: RepositoryContext, pendingId: string): Promise<MessageRecord[]> {
  const rows = await rawRows<Row>(
    tx,
    `SELECT m.* FROM task_session_messages m
      WHERE ${pendingIdOf(tx.dialect, 'm')} = ? AND ${statusIs(tx.dialect, 'm', 'responding')}
        AND m.type = '${CLARIFICATION_TYPE}' AND m.turn_id = ${currentTurnIdSubquery(tx.dialect, 'm.task_session_id')}
      ORDER BY ${tx.dialect.timestampKey('m.created_at')} ASC, m.id ASC`,
    [pendingId],
  );
  return rows.map(toMessageRecord);
}

/**
 * Delivery succeeded: clears `response_delivery_pending` on exactly the claimed rows, leaving
 * `updated_at` as the answer time. Returns the rows it changed.
 */
export function finalizeClarificationDelivery(ctx: RepositoryContext, messageIds: readonly string[]): Promise<MessageRecord[]> {
  return beginOrJoin(ctx, async (tx) => {
    if (messageIds.length === 0) return [];
    const d = tx.dialect;
    const patch = d.jsonPatch('metadata', {}, ['response_delivery_pending']);
    const members = d.inList('m.id', messageIds);
    const rows = await rawRows<Row>(
      tx,
      `UPDATE task_session_messages AS m SET metadata = ${patch.sql}
        WHERE ${members.sql} AND ${d.jsonFlag('m.metadata', 'response_delivery_pending')} RETURNING *`,
      [...patch.bindings, ...members.bindings],
    );
    return rows.map(toMessageRecord);
  });
}

export type RestoreResult = { restored: true; rows: MessageRecord[] } | { restored: false; reason: 'NOT_RESTORABLE' };

/**
 * Reopens the rows a failed delivery's claim took: only if every one is still `terminalStatus` with
 * the delivery marker, on the current turn of a non-terminal session, in a well-formed bundle.
 * Siblings outside the claim are never touched. All or nothing.
 */
export function restoreClaimedClarifications(
  ctx: RepositoryContext,
  pendingId: string,
  terminalStatus: TerminalOutcome,
  claimedMessageIds: readonly string[],
): Promise<RestoreResult> {
  return beginOrJoin(ctx, async (tx) => {
    const ids = new Set(claimedMessageIds);
    if (ids.size === 0 || ids.size !== claimedMessageIds.length) throw new ClaimIntegrityError('claimed ids must be non-empty and distinct');
    await lockBundle(tx, pendingId);
    const d = tx.dialect;
    const restorable = await rawRows<Row>(
      tx,
      `SELECT m.id FROM task_session_messages m
        WHERE ${pendingIdOf(d, 'm')} = ? AND ${statusIs(d, 'm', terminalStatus)}
          AND ${d.jsonFlag('m.metadata', 'response_delivery_pending')} AND ${ownedByCurrentTurn(tx)}`,
      [pendingId],
    );
    const available = new Set(restorable.map((r) => String(r.id)));
    if ([...ids].some((id) => !available.has(id))) return { restored: false, reason: 'NOT_RESTORABLE' };
    const patch = d.jsonPatch('metadata', { status: 'pending' }, ['response', 'response_delivery_pending', 'reject_reason']);
    const members = d.inList('m.id', [...ids]);
    const rows = await rawRows<Row>(
      tx,
      `UPDATE task_session_messages AS m SET metadata = ${patch.sql}, updated_at = ?
        WHERE ${members.sql} AND ${pendingIdOf(d, 'm')} = ? AND ${statusIs(d, 'm', terminalStatus)}
          AND ${d.jsonFlag('m.metadata', 'response_delivery_pending')} AND ${ownedByCurrentTurn(tx)}
        RETURNING *`,
      [...patch.bindings, storedNow(tx), ...members.bindings, pendingId],
    );
    if (rows.length !== ids.size) throw new ClaimIntegrityError(`restore of ${pendingId} lost its terminal claim`);
    return { restored: true, rows: rows.map(toMessageRecord) };
  });
}

/** Pending ids that still carry `response_delivery_pending` rows (crash between claim and delivery). */
export async function listPendingDeliveries(ctx: RepositoryContext): Promise<string[]> {
  const d = ctx.dialect;
  const rows = await rawRows<{ pending_id: string }>(
    ctx,
    `SELECT DISTINCT ${pendingIdOf(d, 'm')} AS pending_id FROM task_session_messages m
      WHERE m.type = '${CLARIFICATION_TYPE}' AND ${d.jsonFlag('m.metadata', 'response_delivery_pending')}
        AND ${pendingIdOf(d, 'm')} IS NOT NULL`,
  );
  return rows.map((r) => r.pending_id).sort();
}
