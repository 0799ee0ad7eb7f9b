import { rawRows, type RepositoryContext } from '../context.js';
import type { SqlDialect, SqlFragment } from '../dialect.js';
import { toPromptReceiptRecord, type PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { QueuedPromptTables } from '../schema/queueTables.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';

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
 * Both honour Kandev's in-flight rule (`QueuedMessage.IsReservedInFlight`): a row is in flight when
 * it is durable (`lifecycle_durable_until_accepted` is JSON `true`, or `origin` is
 * `github_pr_automation`) **and** `lifecycle_reserved_in_flight` is JSON `true`; any other value
 * (`1`, `"true"`) is not Kandev's `true`. The dispatcher writes both flags on a row it reserves and
 * takes the reserved one off when it gives the row back (`inFlightMetadata`), so Kandev's readers of
 * an owned-mode `queued_messages` hide exactly the rows in delivery. A `metadata_json` of `''` or
 * garbage, written by another producer, reads as "no keys" (dialect.ts).
 */

const KANDEV_IN_FLIGHT_KEY = 'lifecycle_reserved_in_flight';
const KANDEV_DURABLE_KEY = 'lifecycle_durable_until_accepted';
const KANDEV_DURABLE_ORIGIN = 'github_pr_automation';

/** Both of Kandev's flags: a direct receipt carries them from its insert (it never waits in a queue). */
export const KANDEV_IN_FLIGHT_FLAGS: Readonly<Record<string, true>> = { [KANDEV_DURABLE_KEY]: true, [KANDEV_IN_FLIGHT_KEY]: true };

/** Kandev's in-flight rule over the metadata column `column`. */
function kandevInFlight(dialect: SqlDialect, column: string): string {
  const durable = `(${dialect.jsonTrue(column, KANDEV_DURABLE_KEY)} OR COALESCE(${dialect.jsonString(column, 'origin')}, '') = '${KANDEV_DURABLE_ORIGIN}')`;
  return `(${durable} AND ${dialect.jsonTrue(column, KANDEV_IN_FLIGHT_KEY)})`;
}

/** The waiting rule over a receipt table aliased `alias`. */
export function waitingReceiptPredicate(dialect: SqlDialect, alias: string): string {
  return (
    `${alias}.delivery_kind = 'queued' AND ${alias}.delivery_attempted_at IS NULL AND ${alias}.delivery_reservation_token IS NULL` +
    ` AND NOT ${kandevInFlight(dialect, `${alias}.metadata_json`)}`
  );
}

/** The waiting rule over Kandev's own `queued_messages` aliased `alias` (no receipt columns there). */
function waitingKandevQueuePredicate(dialect: SqlDialect, alias: string): string {
  return `NOT ${kandevInFlight(dialect, `${alias}.metadata_json`)}`;
}

/**
 * The `metadata_json` of a receipt row as Kandev must read it: `inFlight` (reserved or being
 * delivered) sets both of Kandev's flags; a queued row given back loses the reserved flag (it waits
 * again), a direct one keeps both.
 */
export function inFlightMetadata(dialect: SqlDialect, inFlight: boolean): SqlFragment {
  if (inFlight) return dialect.jsonPatch('metadata_json', KANDEV_IN_FLIGHT_FLAGS);
  const released = dialect.jsonPatch('metadata_json', {}, [KANDEV_IN_FLIGHT_KEY]);
  return { sql: `(CASE WHEN delivery_kind = 'queued' THEN ${released.sql} ELSE metadata_json END)`, bindings: released.bindings };
}

/** Waiting rows of one session in this service's receipt table: the queue it drains and limits. */
export async function countWaitingQueuedPrompts(ctx: RepositoryContext, table: ReceiptTable, sessionId: string): Promise<number> {
  const rows = await rawRows<{ n: number | string }>(
    ctx,
    `SELECT COUNT(*) AS n FROM ${table} q WHERE q.session_id = ? AND ${waitingReceiptPredicate(ctx.dialect, 'q')}`,
    [sessionId],
  );
  return Number(rows[0]?.n ?? 0);
}

/** Waiting rows of one session, and the UTF-8 bytes of their prompts together (PLAN_COMMENT_LIMITS.queueTextMaxBytes). */
export async function waitingQueueSize(
  ctx: RepositoryContext,
  table: ReceiptTable,
  sessionId: string,
  exceptId?: string,
): Promise<{ count: number; contentBytes: number }> {
  const rows = await rawRows<{ n: number | string; bytes: number | string | null }>(
    ctx,
    `SELECT COUNT(*) AS n, SUM(${ctx.dialect.utf8Bytes('q.content')}) AS bytes FROM ${table} q
      WHERE q.session_id = ? AND ${waitingReceiptPredicate(ctx.dialect, 'q')}${exceptId === undefined ? '' : ' AND q.id <> ?'}`,
    exceptId === undefined ? [sessionId] : [sessionId, exceptId],
  );
  return { count: Number(rows[0]?.n ?? 0), contentBytes: Number(rows[0]?.bytes ?? 0) };
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
 * The number of waiting queued prompts of the session `sessionColumn` names, as a scalar
 * subquery: this service's waiting receipts plus, beside Kandev, the waiting rows of Kandev's own
 * queue. It is a column of the projection's first statement (`loadTaskPendingStates`), not a
 * statement of its own: a projection transaction is a handful of statements, and one more cost
 * PostgreSQL a quarter of its projections per second. Both tables are indexed by session.
 */
export function waitingQueuedPromptsOfSession(dialect: SqlDialect, tables: QueuedPromptTables, sessionColumn: string): string {
  const parts: string[] = [];
  if (tables.receiptTable)
    parts.push(`(SELECT COUNT(*) FROM ${tables.receiptTable} q WHERE q.session_id = ${sessionColumn} AND ${waitingReceiptPredicate(dialect, 'q')})`);
  if (tables.kandevQueue)
    parts.push(`(SELECT COUNT(*) FROM queued_messages k WHERE k.session_id = ${sessionColumn} AND ${waitingKandevQueuePredicate(dialect, 'k')})`);
  return parts.length > 0 ? parts.join(' + ') : '0';
}
