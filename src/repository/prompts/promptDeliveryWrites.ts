import { insertPromptTranscript } from './promptTranscript.js';
import { findActiveClarificationMessages } from '../clarifications/clarifications.js';
import { rawRows, storedNow, beginOrJoin, type RepositoryContext } from '../context.js';
import { TURN_META_PROMPT_DISPATCH_ATTEMPTED, TURN_META_PROMPT_DISPATCH_PENDING } from '../turns/currentTurnAuthority.js';
import { toPromptReceiptRecord, writtenNow, type PromptReceiptRecord } from '../planComments/planCommentRows.js';
import { PROMPTABLE_SESSION_STATES } from '../../turns/sessionStates.js';
import { headOrder, RESERVATION_LOST, releaseReservation, type ReservationLost } from './promptReservations.js';
import { toMessageRecord, type MessageRecord } from '../rowMapping.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';
import { pausedPredicate } from './queueAutoRun.js';
import { primaryGuardBroken } from './primaryGuard.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import { patchTurnMetadata } from '../turns/turns.js';
import { isLiveClarification } from '../../turns/liveClarification.js';

/**
 * The delivery side of durable prompt receipts: the deterministic transcript written before any
 * I/O, the at-most-once marker written immediately before the one publish, the settlement that
 * deletes the receipt and labels the transcript, and reconciliation's removal of an attempted one.
 * Every owner write is fenced by the reservation token (see promptReservations.ts); a miss is
 * `reservation_lost` and wrote nothing.
 *
 * Lock order, the accepting transaction's (ADR 0002): the task row, then the session's turn-write
 * lock, then rows. Every transaction here takes the turn-write lock before it touches a receipt row,
 * as reserving the head does, so a reservation and a transcript of one session never wait on each other crosswise.
 */

/** The outcome label of an attempted prompt, kept on its transcript message as `metadata.prompt_delivery`. */
export type PromptDeliveryLabel = 'acknowledged' | 'unconfirmed';

type Row = Record<string, unknown>;

/** The receipt under its live reservation, row-locked (PostgreSQL) until the transaction ends; undefined when the token is lost. */
async function fencedReceipt(tx: RepositoryContext, table: ReceiptTable, id: string, token: string): Promise<PromptReceiptRecord | undefined> {
  const rows = await rawRows<Row>(
    tx,
    `SELECT * FROM ${table} WHERE id = ? AND delivery_reservation_token = ? AND delivery_reservation_expires_at > ? AND delivery_attempted_at IS NULL${tx.dialect.forUpdate}`,
    [id, token, tx.clock()],
  );
  return rows[0] ? toPromptReceiptRecord(rows[0]) : undefined;
}

async function sessionOfReceipt(tx: RepositoryContext, table: ReceiptTable, id: string): Promise<string | undefined> {
  const rows = await rawRows<{ session_id: string }>(tx, `SELECT session_id FROM ${table} WHERE id = ?`, [id]);
  return rows[0] ? String(rows[0].session_id) : undefined;
}

/** The transcript of a receipt: its user message, the reserved turn, and the message's prompt sequence number. */
export interface PromptTranscript {
  message: MessageRecord;
  turnId: string;
  promptSeq: number | null;
  /** True when this call wrote it (a queued row's first transcript); false when it was already linked. */
  written: boolean;
}

export type TranscriptResult = ({ ok: true } & PromptTranscript) | ReservationLost | { ok: false; reason: 'transcript_missing' };

async function readTranscript(tx: RepositoryContext, messageId: string, written: boolean): Promise<TranscriptResult> {
  const row = (await rawRows<Row>(tx, `SELECT * FROM task_session_messages WHERE id = ?`, [messageId]))[0];
  if (!row) return { ok: false, reason: 'transcript_missing' };
  return {
    ok: true,
    message: toMessageRecord(row),
    turnId: String(row.turn_id),
    promptSeq: row.prompt_seq === null || row.prompt_seq === undefined ? null : Number(row.prompt_seq),
    written,
  };
}

/**
 * The deterministic transcript of a receipt, before any external I/O. A direct receipt
 * got it in its accepting transaction; a queued one gets it here, once: the fenced link of the
 * receipt to the transcript, a new reserved turn (`prompt_dispatch_pending`), the user message with
 * id = receipt id (so a takeover that finds it linked writes nothing, and a retry can never write a
 * second row), its `prompt_seq`, and the claimed attachments' `message_id`. `attachments`: whether
 * the database has the attachment table.
 */
export function persistPromptTranscript(
  ctx: RepositoryContext,
  table: ReceiptTable,
  id: string,
  token: string,
  attachments: boolean,
): Promise<TranscriptResult> {
  return beginOrJoin(ctx, async (tx) => {
    const sessionId = await sessionOfReceipt(tx, table, id);
    if (sessionId === undefined) return RESERVATION_LOST;
    await lockSessionTurnWrites(tx, [sessionId]);
    const receipt = await fencedReceipt(tx, table, id, token);
    if (!receipt) return RESERVATION_LOST;
    if (receipt.transcriptMessageId !== null) return readTranscript(tx, receipt.transcriptMessageId, false);

    const carried = (key: string) => (receipt.metadata[key] !== undefined ? { [key]: receipt.metadata[key] } : {});
    const metadata: Record<string, unknown> = {
      client_message_id: receipt.id,
      receipt_id: receipt.id,
      queue_id: receipt.id,
      delivery_kind: receipt.deliveryKind,
      plan_comment_refs: Array.isArray(receipt.metadata.plan_comment_refs) ? receipt.metadata.plan_comment_refs : [],
      ...carried('plan_comment_request_fingerprint'),
      ...carried('client_queue_id'),
      ...(receipt.attachments.length > 0 ? { attachments: receipt.attachments } : {}),
    };
    const { turnId } = await insertPromptTranscript(tx, {
      id: receipt.id,
      sessionId,
      taskId: receipt.taskId,
      content: receipt.content,
      authorId: '',
      metadata,
    });
    const linked = await rawRows(
      tx,
      `UPDATE ${table} SET durable_transcript_message_id = ?, durable_transcript_turn_id = ?
        WHERE id = ? AND delivery_reservation_token = ? AND delivery_reservation_expires_at > ? AND delivery_attempted_at IS NULL RETURNING id`,
      [receipt.id, turnId, receipt.id, token, tx.clock()],
    );
    // Locked and checked above in this transaction; a miss here is a broken invariant, and the throw rolls the transcript back.
    if (linked.length !== 1) throw new Error(`receipt ${receipt.id} changed under its own row lock`);
    if (attachments) {
      await tx
        .knex('task_message_attachments')
        .where({ queue_id: receipt.id, state: 'claimed' })
        .update({ message_id: receipt.id, updated_at: writtenNow(tx) });
    }
    return readTranscript(tx, receipt.id, true);
  });
}

/** Why a receipt may not be delivered now: the task or the session is not eligible. */
type MarkRefusal = 'task_inactive' | 'session_unavailable' | 'live_clarification' | 'queue_paused' | 'primary_session_changed';

export type Eligibility = { ok: true; state: string; passthrough: boolean } | { ok: false; reason: MarkRefusal; state?: string };

/** The receipt whose eligibility is asked: the columns the rule reads. */
interface EligibilityTarget {
  id: string;
  taskId: string;
  sessionId: string;
  deliveryKind: string;
}

/**
 * Whether a receipt may be delivered to the session now: the task exists and is not archived; a
 * Run guarded to the primary (primaryGuard.ts) still has its session as the primary; for a queued
 * receipt, the session's current turn holds no live clarification (the guard's rule,
 * `isLiveClarification`: detached ones do not block); the session is promptable. The marker's
 * transaction decides it under its locks; the dispatcher also asks before writing a queued row's
 * transcript, so a busy session never gets a second prompt's turn while it works on one.
 */
async function promptEligibility(ctx: RepositoryContext, table: ReceiptTable, target: EligibilityTarget): Promise<Eligibility> {
  const { taskId, sessionId } = target;
  const task = (await rawRows<Row>(ctx, `SELECT archived_at FROM tasks WHERE id = ?${ctx.dialect.forUpdate}`, [taskId]))[0];
  if (!task || (task.archived_at !== null && task.archived_at !== undefined)) return { ok: false, reason: 'task_inactive' };
  const session = (
    await rawRows<Row>(
      ctx,
      `SELECT s.state, s.is_passthrough, CASE WHEN ${primaryGuardBroken(ctx.dialect, 'q', 's')} THEN 1 ELSE 0 END AS guard_broken
         FROM task_sessions s JOIN ${table} q ON q.id = ? WHERE s.id = ? AND s.task_id = ?`,
      [target.id, sessionId, taskId],
    )
  )[0];
  const state = session ? String(session.state) : '';
  if (session && Number(session.guard_broken) === 1) return { ok: false, reason: 'primary_session_changed', state };
  if (target.deliveryKind !== 'direct' && (await findActiveClarificationMessages(ctx, sessionId)).some(isLiveClarification))
    return { ok: false, reason: 'live_clarification' };
  if (!session || !PROMPTABLE_SESSION_STATES.includes(state)) return { ok: false, reason: 'session_unavailable', state };
  return { ok: true, state, passthrough: Number(session.is_passthrough ?? 0) === 1 };
}

/**
 * Whether the session's head receipt could be delivered now, read without writing: asked before a
 * reservation, so a busy session or a live clarification costs a read per poll, not a reserve and
 * a release (which would also flap the waiting count and its events). Undefined: no unattempted
 * receipt. The marker's transaction decides again under its locks.
 */
export async function headEligibility(ctx: RepositoryContext, table: ReceiptTable, sessionId: string, honourPause: boolean): Promise<Eligibility | undefined> {
  const rows = await rawRows<Row>(
    ctx,
    `SELECT h.id, h.task_id, h.delivery_kind, CASE WHEN ${pausedPredicate(honourPause, 'h.session_id')} THEN 1 ELSE 0 END AS paused
       FROM ${table} h WHERE h.session_id = ? AND h.delivery_attempted_at IS NULL ORDER BY ${headOrder(ctx.dialect)} LIMIT 1`,
    [sessionId],
  );
  const head = rows[0];
  if (!head) return undefined;
  if (String(head.delivery_kind) === 'queued' && Number(head.paused) === 1) return { ok: false, reason: 'queue_paused' };
  return promptEligibility(ctx, table, { id: String(head.id), taskId: String(head.task_id), sessionId, deliveryKind: String(head.delivery_kind) });
}

/** The marker's eligibility check, outside its transaction: the receipt's reservation must be live, then `promptEligibility`. */
export async function checkPromptEligibility(ctx: RepositoryContext, table: ReceiptTable, id: string, token: string): Promise<Eligibility | ReservationLost> {
  const rows = await rawRows<Row>(
    ctx,
    `SELECT task_id, session_id, delivery_kind FROM ${table}
      WHERE id = ? AND delivery_reservation_token = ? AND delivery_reservation_expires_at > ? AND delivery_attempted_at IS NULL`,
    [id, token, ctx.clock()],
  );
  const row = rows[0];
  if (!row) return RESERVATION_LOST;
  return promptEligibility(ctx, table, { id, taskId: String(row.task_id), sessionId: String(row.session_id), deliveryKind: String(row.delivery_kind) });
}

export type MarkResult =
  | { ok: true; receipt: PromptReceiptRecord; previousState: string; passthrough: boolean }
  | ReservationLost
  /** Not eligible: released in the same transaction (as `release` does) with `retryAfterMs`, not counted as an attempt; nothing else written. */
  | { ok: false; reason: MarkRefusal; state?: string };

export interface MarkOptions {
  /** When the session is not eligible, how long the released receipt waits before the next reservation. */
  retryAfterMs: number;
}

/**
 * The at-most-once delivery marker, in one transaction immediately before the publish:
 * the task row lock, the session's turn-write lock, the receipt under its live reservation, then
 * `promptEligibility` (else a release with the refusal as `last_error`), the session claimed
 * `RUNNING` only from a promptable state (so the next queued row waits for the agent's next IDLE),
 * `delivery_attempted_at` (fenced: token, live expiry, not attempted) and the turn's
 * `prompt_dispatch_attempted`. After it commits the receipt is never reserved again.
 */
export function markPromptDeliveryAttempted(ctx: RepositoryContext, table: ReceiptTable, id: string, token: string, options: MarkOptions): Promise<MarkResult> {
  return beginOrJoin(ctx, async (tx): Promise<MarkResult> => {
    const head = (await rawRows<Row>(tx, `SELECT task_id, session_id FROM ${table} WHERE id = ?`, [id]))[0];
    if (!head) return RESERVATION_LOST;
    const taskId = String(head.task_id);
    const sessionId = String(head.session_id);
    // The task row first (the accepting transaction's order), locked by promptEligibility's read on PostgreSQL.
    await rawRows(tx, `SELECT id FROM tasks WHERE id = ?${tx.dialect.forUpdate}`, [taskId]);
    await lockSessionTurnWrites(tx, [sessionId]);
    const receipt = await fencedReceipt(tx, table, id, token);
    if (!receipt) return RESERVATION_LOST;
    const refuse = async (reason: MarkRefusal, state?: string): Promise<MarkResult> => {
      await releaseReservation(tx, table, id, token, { retryAfterMs: options.retryAfterMs, error: reason, countsAsAttempt: false });
      return state === undefined ? { ok: false, reason } : { ok: false, reason, state };
    };
    const eligible = await promptEligibility(tx, table, { id, taskId, sessionId, deliveryKind: receipt.deliveryKind });
    if (!eligible.ok) return refuse(eligible.reason, eligible.state);
    const states = tx.dialect.inList('state', PROMPTABLE_SESSION_STATES);
    const claimed = await rawRows(
      tx,
      `UPDATE task_sessions SET state = 'RUNNING', updated_at = ? WHERE id = ? AND task_id = ? AND ${states.sql} RETURNING id`,
      [storedNow(tx), sessionId, taskId, ...states.bindings],
    );
    if (claimed.length !== 1) return refuse('session_unavailable', eligible.state);
    const now = tx.clock();
    const marked = await rawRows<Row>(
      tx,
      `UPDATE ${table} SET delivery_attempted_at = ?
        WHERE id = ? AND delivery_reservation_token = ? AND delivery_reservation_expires_at > ? AND delivery_attempted_at IS NULL RETURNING *`,
      [now, id, token, now],
    );
    if (marked.length !== 1) throw new Error(`receipt ${id} changed under its own row lock`);
    if (receipt.transcriptTurnId !== null) await patchTurnMetadata(tx, receipt.transcriptTurnId, { [TURN_META_PROMPT_DISPATCH_ATTEMPTED]: true });
    return { ok: true, receipt: toPromptReceiptRecord(marked[0]!), previousState: eligible.state, passthrough: eligible.passthrough };
  });
}

/**
 * Sets the transcript's `prompt_delivery` label, never downgrading `acknowledged`; with
 * `onlyFrom`, only a message currently labelled so (the upgrade of a late settlement).
 */
async function labelTranscript(
  tx: RepositoryContext,
  messageId: string,
  label: PromptDeliveryLabel,
  onlyFrom?: PromptDeliveryLabel,
): Promise<MessageRecord | undefined> {
  const patch = tx.dialect.jsonPatch('metadata', { prompt_delivery: label });
  const current = `COALESCE(${tx.dialect.jsonString('metadata', 'prompt_delivery')}, '')`;
  const guard = onlyFrom !== undefined ? `${current} = ?` : `${current} NOT IN ('acknowledged', ?)`;
  const rows = await rawRows<Row>(tx, `UPDATE task_session_messages SET metadata = ${patch.sql}, updated_at = ? WHERE id = ? AND ${guard} RETURNING *`, [
    ...patch.bindings,
    storedNow(tx),
    messageId,
    onlyFrom ?? label,
  ]);
  return rows[0] ? toMessageRecord(rows[0]) : undefined;
}

async function clearDispatchKeys(tx: RepositoryContext, turnId: string | null): Promise<void> {
  if (turnId === null) return;
  const patch = tx.dialect.jsonPatch('metadata', {}, [TURN_META_PROMPT_DISPATCH_PENDING, TURN_META_PROMPT_DISPATCH_ATTEMPTED]);
  await tx.knex.raw(`UPDATE task_session_turns SET metadata = ${patch.sql}, updated_at = ? WHERE id = ?`, [
    ...patch.bindings,
    storedNow(tx),
    turnId,
  ] as never[]);
}

export interface SettledPrompt {
  receipt: PromptReceiptRecord;
  /** The labelled transcript message; undefined when it was gone or already carried the label. */
  message: MessageRecord | undefined;
}

export type SettleResult = ({ ok: true } & SettledPrompt) | (ReservationLost & { upgraded: MessageRecord | undefined });

/**
 * The settlement: deletes the attempted receipt (fenced by its token), labels its transcript and clears the
 * turn's `prompt_dispatch_*` keys. When the receipt is gone (reconciliation removed it after the
 * owner's reservation expired), only an `acknowledged` outcome is written, as an upgrade of
 * `unconfirmed`: a late owner may know better, never worse.
 */
export function settlePromptReceipt(
  ctx: RepositoryContext,
  table: ReceiptTable,
  id: string,
  token: string,
  label: PromptDeliveryLabel,
  transcriptMessageId: string,
): Promise<SettleResult> {
  return beginOrJoin(ctx, async (tx): Promise<SettleResult> => {
    const sessionId = await sessionOfReceipt(tx, table, id);
    if (sessionId !== undefined) {
      await lockSessionTurnWrites(tx, [sessionId]);
      const deleted = await rawRows<Row>(
        tx,
        `DELETE FROM ${table} WHERE id = ? AND delivery_reservation_token = ? AND delivery_attempted_at IS NOT NULL RETURNING *`,
        [id, token],
      );
      if (deleted[0]) {
        const receipt = toPromptReceiptRecord(deleted[0]);
        const message = await labelTranscript(tx, receipt.transcriptMessageId ?? transcriptMessageId, label);
        await clearDispatchKeys(tx, receipt.transcriptTurnId);
        return { ok: true, receipt, message };
      }
    }
    const upgraded = label === 'acknowledged' ? await labelTranscript(tx, transcriptMessageId, 'acknowledged', 'unconfirmed') : undefined;
    return { ...RESERVATION_LOST, upgraded };
  });
}

/**
 * Reconciliation's removal of an attempted receipt whose owner's reservation expired: deleted without any
 * dispatch, its transcript labelled from what the prompt stream holds, its turn's keys cleared.
 * Undefined when the row is no longer such (its owner renewed or settled it meanwhile).
 */
export function removeAttemptedPromptReceipt(
  ctx: RepositoryContext,
  table: ReceiptTable,
  id: string,
  label: PromptDeliveryLabel,
): Promise<SettledPrompt | undefined> {
  return beginOrJoin(ctx, async (tx) => {
    const sessionId = await sessionOfReceipt(tx, table, id);
    if (sessionId === undefined) return undefined;
    await lockSessionTurnWrites(tx, [sessionId]);
    const deleted = await rawRows<Row>(
      tx,
      `DELETE FROM ${table} WHERE id = ? AND delivery_attempted_at IS NOT NULL AND delivery_reservation_expires_at <= ? RETURNING *`,
      [id, tx.clock()],
    );
    if (!deleted[0]) return undefined;
    const receipt = toPromptReceiptRecord(deleted[0]);
    const message = receipt.transcriptMessageId !== null ? await labelTranscript(tx, receipt.transcriptMessageId, label) : undefined;
    await clearDispatchKeys(tx, receipt.transcriptTurnId);
    return { receipt, message };
  });
}
