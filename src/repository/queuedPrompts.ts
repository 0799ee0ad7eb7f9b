import { rawRows, type RepositoryContext } from './context.js';
import type { SqlDialect } from './dialect.js';
import { toPromptReceiptRecord, type PromptReceiptRecord } from './planCommentRows.js';
import type { QueuedPromptTables } from './schema/queueTables.js';
import type { ReceiptTable } from './schema/planCommentTables.js';

/**
 * Which queued prompts are **waiting**: what `queue.list` lists, what `QUEUE_MAX_PER_SESSION`
 * limits, what `message.queue.status_changed` counts and what the summary's `queued_prompt_count`
 * says. One rule, written here once:
 *
 * - a receipt row (owned mode's `queued_messages`, or `pending_projector_prompt_receipts` beside
 *   Kandev) waits while it is `delivery_kind = 'queued'` (a direct receipt never does), not attempted
 *   and not reserved. An expired reservation still counts as reserved until reconciliation releases
 *   it (and publishes), so the count never depends on the wall clock;
 * - a row of Kandev's own `queued_messages` (beside Kandev: no receipt columns) waits unless Kandev
 *   flagged it `lifecycle_reserved_in_flight` in `metadata_json`.
 *
 * Both honour Kandev's in-flight flag (the dispatcher mirrors its reservation into it); a
 * `metadata_json` of `''` or garbage, written by another producer, reads as "no keys" (dialect.ts).
 */

export const KANDEV_IN_FLIGHT_KEY = 'lifecycle_reserved_in_flight';

/** The waiting rule over a receipt table aliased `alias`. */
export function waitingReceiptPredicate(dialect: SqlDialect, alias: string): string {
  return (
    `${alias}.delivery_kind = 'queued' AND ${alias}.delivery_attempted_at IS NULL AND ${alias}.delivery_reservation_token IS NULL` +
    ` AND NOT ${dialect.jsonFlag(`${alias}.metadata_json`, KANDEV_IN_FLIGHT_KEY)}`
  );
}

/** The waiting rule over Kandev's own `queued_messages` aliased `alias` (no receipt columns there). */
export function waitingKandevQueuePredicate(dialect: SqlDialect, alias: string): string {
  return `NOT ${dialect.jsonFlag(`${alias}.metadata_json`, KANDEV_IN_FLIGHT_KEY)}`;
}

/** Waiting rows of one session in this service's receipt table: the queue it drains and limits. */
export async function countWaitingQueuedPrompts(ctx: RepositoryContext, table: ReceiptTable, sessionId: string): Promise<number> {
  const rows = await rawRows<{ n: number | string }>(ctx, `SELECT COUNT(*) AS n FROM ${table} q WHERE q.session_id = ? AND ${waitingReceiptPredicate(ctx.dialect, 'q')}`, [sessionId]);
  return Number(rows[0]?.n ?? 0);
}

/** Waiting rows of one session in queue order (position, then id). */
export async function listWaitingQueuedPrompts(ctx: RepositoryContext, table: ReceiptTable, sessionId: string): Promise<PromptReceiptRecord[]> {
  const rows = await rawRows<Record<string, unknown>>(
    ctx,
    `SELECT q.* FROM ${table} q WHERE q.session_id = ? AND ${waitingReceiptPredicate(ctx.dialect, 'q')} ORDER BY q.position, ${ctx.dialect.binaryText('q.id')}`,
    [sessionId],
  );
  return rows.map(toPromptReceiptRecord);
}

/**
 * The summary's `queued_prompt_count` per task: waiting receipts plus, beside Kandev, the waiting
 * rows of Kandev's own queue. One statement whatever the batch size; tasks without any are absent.
 */
export async function countQueuedPromptsByTask(ctx: RepositoryContext, tables: QueuedPromptTables, taskIds: readonly string[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  if (taskIds.length === 0 || (!tables.receiptTable && !tables.kandevQueue)) return counts;
  const parts: string[] = [];
  const bindings: unknown[] = [];
  if (tables.receiptTable) {
    const members = ctx.dialect.inList('q.task_id', taskIds);
    parts.push(`SELECT q.task_id FROM ${tables.receiptTable} q WHERE ${members.sql} AND ${waitingReceiptPredicate(ctx.dialect, 'q')}`);
    bindings.push(...members.bindings);
  }
  if (tables.kandevQueue) {
    const members = ctx.dialect.inList('k.task_id', taskIds);
    parts.push(`SELECT k.task_id FROM queued_messages k WHERE ${members.sql} AND ${waitingKandevQueuePredicate(ctx.dialect, 'k')}`);
    bindings.push(...members.bindings);
  }
  const rows = await rawRows<{ task_id: string; n: number | string }>(
    ctx,
    `SELECT w.task_id, COUNT(*) AS n FROM (${parts.join(' UNION ALL ')}) w GROUP BY w.task_id`,
    bindings,
  );
  for (const row of rows) counts.set(String(row.task_id), Number(row.n));
  return counts;
}
