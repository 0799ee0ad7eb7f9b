import { rawRows, type RepositoryContext } from '../context.js';
import { waitingReceiptPredicate } from './queuedPrompts.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';

/**
 * How many prompt receipts of the whole database are in each step of delivery, for the worker's
 * gauges. A receipt is one of:
 * - `waiting`: not reserved and not attempted. For a queued receipt this is exactly the waiting
 *   rule (queuedPrompts.ts) that `queue.list` and `queued_prompt_count` follow;
 * - `reserved`: a dispatcher holds it (an expired reservation counts until reconciliation clears
 *   it, as in the waiting rule) and has not yet written its at-most-once marker;
 * - `attempted`: the marker is written, the settlement is not (a publish in progress, or an
 *   outcome in doubt that reconciliation will settle).
 * Settled receipts are deleted, so none of them is counted.
 */
type PromptReceiptState = 'waiting' | 'reserved' | 'attempted';
type PromptReceiptKind = 'direct' | 'queued';
const PROMPT_RECEIPT_STATES: readonly PromptReceiptState[] = ['waiting', 'reserved', 'attempted'];
const PROMPT_RECEIPT_KINDS: readonly PromptReceiptKind[] = ['direct', 'queued'];

export interface PromptReceiptCount {
  kind: PromptReceiptKind;
  state: PromptReceiptState;
  count: number;
}

/**
 * One grouped COUNT over the receipt table (it holds only undelivered prompts, so it stays small),
 * with every kind and state present, at 0 when none is in it.
 */
export async function countPromptReceiptsByState(ctx: RepositoryContext, table: ReceiptTable): Promise<PromptReceiptCount[]> {
  const rows = await rawRows<{ kind: string; state: string; n: number | string }>(
    ctx,
    `SELECT s.kind, s.state, COUNT(*) AS n FROM (
       SELECT CASE WHEN q.delivery_kind = 'direct' THEN 'direct' ELSE 'queued' END AS kind,
              CASE WHEN q.delivery_attempted_at IS NOT NULL THEN 'attempted'
                   WHEN q.delivery_kind = 'direct' AND q.delivery_reservation_token IS NULL THEN 'waiting'
                   WHEN ${waitingReceiptPredicate(ctx.dialect, 'q')} THEN 'waiting'
                   ELSE 'reserved' END AS state
         FROM ${table} q) s
     GROUP BY s.kind, s.state`,
  );
  const count = (kind: PromptReceiptKind, state: PromptReceiptState) => Number(rows.find((r) => r.kind === kind && r.state === state)?.n ?? 0);
  return PROMPT_RECEIPT_KINDS.flatMap((kind) => PROMPT_RECEIPT_STATES.map((state) => ({ kind, state, count: count(kind, state) })));
}
