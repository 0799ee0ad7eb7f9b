import { countPromptReceiptsByState, type PromptReceiptCount } from './promptReceiptCounts.js';
import type { RepositoryContext } from '../context.js';
import type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
import {
  checkPromptEligibility,
  headEligibility,
  markPromptDeliveryAttempted,
  persistPromptTranscript,
  removeAttemptedPromptReceipt,
  settlePromptReceipt,
  type Eligibility,
  type MarkOptions,
  type MarkResult,
  type PromptDeliveryLabel,
  type SettledPrompt,
  type SettleResult,
  type TranscriptResult,
} from './promptDeliveryWrites.js';
import { getPromptReceipt } from './promptReceipts.js';
import { readQueueStatus, type QueueStatus } from './queueStatus.js';
import {
  clearExpiredReservation,
  listDispatchableSessions,
  listReconcilableReceipts,
  releaseReservation,
  removeOrphanReceipt,
  renewReservation,
  reserveHead,
  type ReconcilableReceipt,
  type ReleaseInput,
  type Reservation,
  type ReservationLost,
} from './promptReservations.js';
import type { PlanCommentSchema, ReceiptTable } from '../schema/planCommentTables.js';
import type { CanonicalTimestamp } from '../../timestamps.js';

export type { MarkResult, PromptDeliveryLabel, PromptTranscript } from './promptDeliveryWrites.js';
export type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
export type { PromptReceiptCount } from './promptReceiptCounts.js';

/**
 * The prompt dispatcher's and reconciliation's port onto durable prompt receipts:
 * every write fenced by the reservation token. A stale token is the value `{ok: false, reason:
 * 'reservation_lost'}` (every owner write, renewal included): losing the row to a takeover, a release or a settlement is an
 * expected outcome, and the caller stops without writing or publishing anything more. Only a
 * failure of the database rejects.
 *
 * Each operation is one transaction over `schema.receiptTable` (owned mode's `queued_messages`, or
 * `pending_projector_prompt_receipts` beside Kandev's tables; the same columns).
 */
export interface PromptReceiptStore {
  /** Whether this database can hold and deliver receipts at all (a receipt table, the prompt-sequence counter); every write below needs it. */
  readonly available: boolean;
  now(): CanonicalTimestamp;
  /** Sessions with a reservable receipt that is due (the dispatcher's poll). */
  listDispatchableSessions(limit: number, after?: string): Promise<string[]>;
  /**
   * The session's head, reserved for `owner` until now + ttl; undefined when the session has nothing
   * reservable. `drain`: a paused queue's head too (`queue.drain`).
   */
  reserveHead(sessionId: string, owner: string, ttlMs: number, options?: HeadOptions): Promise<Reservation | undefined>;
  /** The owner's heartbeat. */
  renew(id: string, token: string, ttlMs: number): Promise<{ ok: true } | ReservationLost>;
  /** The marker's eligibility rule for the session's head receipt, read without writing, before reserving it; undefined: nothing to deliver. */
  headEligibility(sessionId: string, options?: HeadOptions): Promise<Eligibility | undefined>;
  /** The marker's eligibility rule, read without writing: asked before a queued receipt's transcript is written. */
  checkEligibility(id: string, token: string): Promise<Eligibility | ReservationLost>;
  /** The deterministic transcript (written for a queued receipt, read for a direct one). */
  persistTranscript(id: string, token: string): Promise<TranscriptResult>;
  /** The at-most-once marker, or a release when the task or session is not eligible. */
  markAttempted(id: string, token: string, options: MarkOptions): Promise<MarkResult>;
  /** Back for retry after `retryAfterMs`, with `last_error`. */
  release(id: string, token: string, input: ReleaseInput): Promise<{ ok: true } | ReservationLost>;
  /** The settlement: deletes the attempted receipt and labels its transcript. */
  settle(id: string, token: string, label: PromptDeliveryLabel, transcriptMessageId: string): Promise<SettleResult>;
  /** Reconciliation: every receipt, classified. */
  listReconcilable(): Promise<ReconcilableReceipt[]>;
  /** Reconciliation: clears a dead owner's expired reservation of an unattempted receipt. */
  clearExpiredReservation(id: string, token: string): Promise<boolean>;
  /** Reconciliation: removes an attempted receipt whose reservation expired, without dispatch. */
  removeAttempted(id: string, label: PromptDeliveryLabel): Promise<SettledPrompt | undefined>;
  /** Reconciliation: deletes a receipt whose task is gone. */
  removeOrphan(id: string): Promise<boolean>;
  /** The session's queue as `message.queue.status_changed` tells it (queueStatus.ts). */
  queueStatus(sessionId: string): Promise<QueueStatus>;
  /** Every receipt of the database by kind and step of delivery (the worker's gauges); undefined when there is no receipt table. */
  countByState(): Promise<PromptReceiptCount[] | undefined>;
  getReceipt(id: string): Promise<PromptReceiptRecord | undefined>;
}

interface HeadOptions {
  /** Deliver a paused queue's head anyway: `queue.drain`. */
  drain?: boolean;
}

/** The store over `ctx`, for a database whose tables `schema` describes (`detectPlanCommentSchema`). */
export function createPromptReceiptStore(ctx: RepositoryContext, schema: PlanCommentSchema): PromptReceiptStore {
  const table = schema.receiptTable;
  const attachments = schema.missingForAttachments.length === 0;
  const honourPause = (options?: HeadOptions) => schema.queueState && options?.drain !== true;
  const need = (): ReceiptTable => {
    if (!table) throw new Error('this database has no prompt receipt table');
    return table;
  };
  return {
    available: table !== null && schema.missingForPrompts.length === 0,
    now: () => ctx.clock(),
    listDispatchableSessions: (limit, after) => (table ? listDispatchableSessions(ctx, table, schema.queueState, limit, after) : Promise.resolve([])),
    reserveHead: (sessionId, owner, ttlMs, options) => reserveHead(ctx, need(), sessionId, owner, ttlMs, honourPause(options)),
    renew: (id, token, ttlMs) => renewReservation(ctx, need(), id, token, ttlMs),
    headEligibility: (sessionId, options) => (table ? headEligibility(ctx, table, sessionId, honourPause(options)) : Promise.resolve(undefined)),
    checkEligibility: (id, token) => checkPromptEligibility(ctx, need(), id, token),
    persistTranscript: (id, token) => persistPromptTranscript(ctx, need(), id, token, attachments),
    markAttempted: (id, token, options) => markPromptDeliveryAttempted(ctx, need(), id, token, options),
    release: (id, token, input) => releaseReservation(ctx, need(), id, token, input),
    settle: (id, token, label, messageId) => settlePromptReceipt(ctx, need(), id, token, label, messageId),
    listReconcilable: () => (table ? listReconcilableReceipts(ctx, table) : Promise.resolve([])),
    clearExpiredReservation: (id, token) => clearExpiredReservation(ctx, need(), id, token),
    removeAttempted: (id, label) => removeAttemptedPromptReceipt(ctx, need(), id, label),
    removeOrphan: (id) => removeOrphanReceipt(ctx, need(), id),
    queueStatus: (sessionId) => readQueueStatus(ctx, table, schema.queueState, sessionId),
    countByState: () => (table ? countPromptReceiptsByState(ctx, table) : Promise.resolve(undefined)),
    getReceipt: (id) => (table ? getPromptReceipt(ctx, table, id) : Promise.resolve(undefined)),
  };
}
