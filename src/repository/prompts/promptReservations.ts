import { randomUUID } from 'node:crypto';
import { rawRows, beginOrJoin, type RepositoryContext } from '../context.js';
import { toPromptReceiptRecord, type PromptReceiptRecord } from '../planComments/planCommentRows.js';
import { PROMPTABLE_SESSION_STATES } from '../../turns/sessionStates.js';
import type { SqlDialect } from '../dialect.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';
import { lockSessionTurnWrites } from '../sessionLocks.js';
import { bumpQueueRevision } from './queueRevision.js';
import { pausedPredicate } from './queueAutoRun.js';
import { inFlightMetadata } from './queuedPrompts.js';
import { instantAfter } from '../../timestamps.js';

/**
 * The reservation side of durable prompt receipts: which receipt of a session a dispatcher owns,
 * until when, and how it gives it back (reserving, renewing, releasing, reconciliation's scan).
 * - reserved: `delivery_reservation_token` set and `delivery_reservation_expires_at` in the future;
 *   an expired token is a dead owner's and may be taken over;
 * - attempted: `delivery_attempted_at` set (the at-most-once marker): never reservable again,
 *   only settled by its owner or removed by reconciliation once its reservation expired;
 * - head: the session's first unattempted receipt (direct before queued, then position, id),
 *   picked before any due filter, so a backed-off head blocks its session and FIFO holds.
 *
 * Every owner write names its token and matches 0 rows once the token is gone (taken over,
 * released, settled): the value `{ok: false, reason: 'reservation_lost'}`, never an exception.
 * Timestamps are the canonical text of `ctx.clock()` (SQLite) or timestamp(6) (PostgreSQL).
 */

export type ReservationLost = { ok: false; reason: 'reservation_lost' };

/** A queued receipt that entered or left the waiting set moves its session's queue revision; a direct one is not in the queue. */
async function queueLeft(tx: RepositoryContext, receipt: { deliveryKind: string; sessionId: string }): Promise<void> {
  if (receipt.deliveryKind === 'queued') await bumpQueueRevision(tx, receipt.sessionId);
}
const queueChanged = (tx: RepositoryContext, row: Record<string, unknown> | undefined) =>
  row ? queueLeft(tx, { deliveryKind: String(row.delivery_kind), sessionId: String(row.session_id) }) : Promise.resolve();
export const RESERVATION_LOST: ReservationLost = { ok: false, reason: 'reservation_lost' };

export interface Reservation {
  receipt: PromptReceiptRecord;
  token: string;
}

/**
 * The ORDER BY of a session's receipts (aliased `h`): direct rows first (they were accepted, not
 * queued), then FIFO by position, ties (Kandev-written rows may share a position) by the id's bytes,
 * the order `queue.list` shows, whatever the database's collation.
 */
export function headOrder(dialect: SqlDialect): string {
  return `CASE h.delivery_kind WHEN 'direct' THEN 0 ELSE 1 END, h.position, ${dialect.binaryText('h.id')}`;
}

/**
 * Reserves the session's head receipt for `owner` until now + ttl, or returns undefined when
 * the head is not reservable (reserved by a live owner, backed off) or another receipt of the
 * session is reserved or attempted. At most one receipt per session is ever reserved or attempted.
 *
 * The session's turn-write lock comes first: on PostgreSQL under READ COMMITTED, two concurrent
 * `UPDATE ... WHERE NOT EXISTS` could each see no other reservation and both succeed; serialised on
 * the lock, the second sees the first's commit. SQLite's one writer needs no lock.
 */
export function reserveHead(
  ctx: RepositoryContext,
  table: ReceiptTable,
  sessionId: string,
  owner: string,
  ttlMs: number,
  /** Whether a paused queue keeps its head (queueAutoRun.ts): false for a drain, or where no queue can be paused. */
  honourPause: boolean,
): Promise<Reservation | undefined> {
  return beginOrJoin(ctx, async (tx) => {
    await lockSessionTurnWrites(tx, [sessionId]);
    const now = tx.clock();
    const token = randomUUID();
    const flags = inFlightMetadata(tx.dialect, true);
    const rows = await rawRows<Record<string, unknown>>(
      tx,
      `UPDATE ${table} AS q
          SET metadata_json = ${flags.sql}, delivery_reservation_token = ?, delivery_reservation_owner = ?, delivery_reservation_expires_at = ?,
              delivery_attempts = q.delivery_attempts + 1
        WHERE q.id = (SELECT h.id FROM ${table} h WHERE h.session_id = ? AND h.delivery_attempted_at IS NULL ORDER BY ${headOrder(tx.dialect)} LIMIT 1)
          AND q.delivery_attempted_at IS NULL
          AND (q.delivery_reservation_token IS NULL OR q.delivery_reservation_expires_at <= ?)
          AND (q.next_attempt_at IS NULL OR q.next_attempt_at <= ?)
          AND (q.delivery_kind = 'direct' OR NOT ${pausedPredicate(honourPause, 'q.session_id')})
          AND NOT EXISTS (SELECT 1 FROM ${table} o WHERE o.session_id = q.session_id AND o.id <> q.id
                            AND (o.delivery_attempted_at IS NOT NULL OR (o.delivery_reservation_token IS NOT NULL AND o.delivery_reservation_expires_at > ?)))
        RETURNING *`,
      [...flags.bindings, token, owner, instantAfter(now, ttlMs), sessionId, now, now, now],
    );
    if (!rows[0]) return undefined;
    const receipt = toPromptReceiptRecord(rows[0]);
    await queueLeft(tx, receipt);
    return { receipt, token };
  });
}

/**
 * Extends a live reservation to now + ttl (the owner's heartbeat). Allowed after the marker
 * too, so reconciliation leaves a live owner's attempted receipt alone. An expired token is lost
 * even if nobody took over yet: its owner must not go on as if it still held the row.
 */
export async function renewReservation(
  ctx: RepositoryContext,
  table: ReceiptTable,
  id: string,
  token: string,
  ttlMs: number,
): Promise<{ ok: true } | ReservationLost> {
  const now = ctx.clock();
  const rows = await rawRows(
    ctx,
    `UPDATE ${table} SET delivery_reservation_expires_at = ?
      WHERE id = ? AND delivery_reservation_token = ? AND delivery_reservation_expires_at > ? RETURNING id`,
    [instantAfter(now, ttlMs), id, token, now],
  );
  return rows.length > 0 ? { ok: true } : RESERVATION_LOST;
}

export interface ReleaseInput {
  /** Milliseconds from now before the receipt may be reserved again (0: at once). */
  retryAfterMs: number;
  /** Why it was released (`last_error`); '' for none. */
  error: string;
  /**
   * False for a target that was merely not eligible yet (a busy session, a live clarification):
   * the reservation is then not counted in `delivery_attempts`, whose count drives the failure
   * backoff. Default true.
   */
  countsAsAttempt?: boolean;
}

/**
 * Gives an unattempted receipt back for retry (a failure before the marker, or a target that
 * is not eligible yet). Fenced by the token only, not the expiry: an owner whose lease lapsed may
 * still hand its row back as long as nobody took it over. If the release itself fails, the TTL
 * makes the row available anyway.
 */
export async function releaseReservation(
  ctx: RepositoryContext,
  table: ReceiptTable,
  id: string,
  token: string,
  input: ReleaseInput,
): Promise<{ ok: true } | ReservationLost> {
  return beginOrJoin(ctx, async (tx) => {
    const now = tx.clock();
    const flags = inFlightMetadata(tx.dialect, false);
    const rows = await rawRows<Record<string, unknown>>(
      tx,
      `UPDATE ${table}
          SET metadata_json = ${flags.sql}, delivery_reservation_token = NULL, delivery_reservation_owner = NULL, delivery_reservation_expires_at = NULL,
              next_attempt_at = ?, last_error = ?,
              delivery_attempts = CASE WHEN ? = 1 OR delivery_attempts = 0 THEN delivery_attempts ELSE delivery_attempts - 1 END
        WHERE id = ? AND delivery_reservation_token = ? AND delivery_attempted_at IS NULL RETURNING delivery_kind, session_id`,
      [
        ...flags.bindings,
        input.retryAfterMs > 0 ? instantAfter(now, input.retryAfterMs) : null,
        input.error.slice(0, 2000),
        input.countsAsAttempt === false ? 0 : 1,
        id,
        token,
      ],
    );
    await queueChanged(tx, rows[0]);
    return rows.length > 0 ? { ok: true as const } : RESERVATION_LOST;
  });
}

/**
 * One page of the sessions that may have work for a dispatcher: an unattempted, unreserved (or
 * expired) receipt that is due, on a session in a promptable state. A busy session's receipts wait
 * with nothing written, so without that filter they would fill every page and starve the rest. A
 * listed session may still have its head blocked (a live clarification, a backed-off head: the
 * dispatcher's read and `reserveHead` decide). A paused queue's entries are not listed. Keyset pages
 * by session id (bytes), after `after`.
 */
export async function listDispatchableSessions(
  ctx: RepositoryContext,
  table: ReceiptTable,
  queueState: boolean,
  limit: number,
  after?: string,
): Promise<string[]> {
  const now = ctx.clock();
  const sessionId = ctx.dialect.binaryText('q.session_id');
  const rows = await rawRows<{ session_id: string }>(
    ctx,
    `SELECT q.session_id FROM ${table} q JOIN task_sessions s ON s.id = q.session_id
      WHERE q.delivery_attempted_at IS NULL
        AND (q.delivery_reservation_token IS NULL OR q.delivery_reservation_expires_at <= ?)
        AND (q.next_attempt_at IS NULL OR q.next_attempt_at <= ?)
        AND ${ctx.dialect.inList('s.state', PROMPTABLE_SESSION_STATES).sql}
        AND (q.delivery_kind = 'direct' OR NOT ${pausedPredicate(queueState, 'q.session_id')})
        ${after === undefined ? '' : `AND ${sessionId} > ?`}
      GROUP BY q.session_id ORDER BY ${sessionId} LIMIT ?`,
    [now, now, ...ctx.dialect.inList('s.state', PROMPTABLE_SESSION_STATES).bindings, ...(after === undefined ? [] : [after]), limit],
  );
  return rows.map((r) => String(r.session_id));
}

/** What reconciliation does with one receipt. */
type ReconcileClass =
  /** Unattempted and unreserved or expired: the dispatcher takes it (an expired token is cleared first). */
  | 'resume'
  /** Attempted, and its owner's reservation expired: removed without dispatch, labelled from the stream. */
  | 'remove'
  /** Reserved or attempted by an owner whose reservation is live: its owner is alive. */
  | 'defer'
  /** Its task is gone: deleted. */
  | 'orphan';

export interface ReconcilableReceipt {
  receipt: PromptReceiptRecord;
  action: ReconcileClass;
}

/** Every receipt with what reconciliation does with it, classified at one instant, in session and head order. */
export async function listReconcilableReceipts(ctx: RepositoryContext, table: ReceiptTable): Promise<ReconcilableReceipt[]> {
  const now = ctx.clock();
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT h.*,
            CASE WHEN NOT EXISTS (SELECT 1 FROM tasks tk WHERE tk.id = h.task_id) THEN 'orphan'
                 WHEN h.delivery_reservation_token IS NOT NULL AND h.delivery_reservation_expires_at > ? THEN 'defer'
                 WHEN h.delivery_attempted_at IS NOT NULL THEN 'remove'
                 ELSE 'resume' END AS reconcile_action
       FROM ${table} h ORDER BY h.session_id, ${headOrder(ctx.dialect)}`,
    [now],
  );
  return rows.map((row) => ({ receipt: toPromptReceiptRecord(row), action: String(row.reconcile_action) as ReconcileClass }));
}

/**
 * Clears an expired reservation of an unattempted receipt (a dead owner's), so the row reads as
 * waiting and the next `reserveHead` takes it with a fresh token. Fenced by the dead token and the expiry: a
 * takeover in between keeps its own.
 */
export function clearExpiredReservation(ctx: RepositoryContext, table: ReceiptTable, id: string, token: string): Promise<boolean> {
  return beginOrJoin(ctx, async (tx) => {
    const flags = inFlightMetadata(tx.dialect, false);
    const rows = await rawRows<Record<string, unknown>>(
      tx,
      `UPDATE ${table} SET metadata_json = ${flags.sql}, delivery_reservation_token = NULL, delivery_reservation_owner = NULL, delivery_reservation_expires_at = NULL
        WHERE id = ? AND delivery_reservation_token = ? AND delivery_reservation_expires_at <= ? AND delivery_attempted_at IS NULL
        RETURNING delivery_kind, session_id`,
      [...flags.bindings, id, token, tx.clock()],
    );
    await queueChanged(tx, rows[0]);
    return rows.length > 0;
  });
}

/** Deletes the receipt of a task that no longer exists. */
export async function removeOrphanReceipt(ctx: RepositoryContext, table: ReceiptTable, id: string): Promise<boolean> {
  const rows = await rawRows(ctx, `DELETE FROM ${table} WHERE id = ? AND NOT EXISTS (SELECT 1 FROM tasks tk WHERE tk.id = ${table}.task_id) RETURNING id`, [
    id,
  ]);
  return rows.length > 0;
}
