import { rawRows, type RepositoryContext } from '../context.js';
import { snapshotIn } from '../planComments/planComments.js';
import { conflict, type Conflict } from '../planComments/planCommentOutcomes.js';
import type { AcceptedPrompt, AcceptPromptInput, DeliveryKind, PromptDelivery, PromptStatus } from './acceptedPrompt.js';
import { getPromptOutcome, type PromptOutcome } from './promptOutcomes.js';
import { getPromptReceipt } from './promptReceipts.js';
import type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
import { parseMetadata } from '../rowMapping.js';
import type { PlanCommentSchema } from '../schema/planCommentTables.js';

/**
 * Caller-id replay of an accepted prompt: the receipt is the replay record while it exists, and the
 * transcript message keeps the caller id afterwards, so a lost reply can still be answered. The receipt
 * and the transcript message both carry the caller id as their key and the request fingerprint in
 * their metadata; the receipt goes once delivered, the message stays. A queue entry withdrawn before
 * delivery (removed, cancelled) leaves neither: its outcome record (promptOutcomes.ts) answers instead.
 */

type Row = Record<string, unknown>;

export interface PriorAcceptance {
  sessionId: string;
  taskId: string;
  fingerprint: string | undefined;
  content: string;
  turnId: string | null;
  promptSeq: number | null;
  receiptPresent: boolean;
  deliveryKind: DeliveryKind;
  /** A queued prompt's position while its receipt exists; null otherwise (a direct prompt has none). */
  position: number | null;
  /** Whether the transcript message exists (a queued prompt has none until its reservation). */
  messagePresent: boolean;
  delivery: PromptDelivery;
  status: PromptStatus;
  statusReason: string;
  refs: string[];
  attachmentIds: string[];
}

function stringList(value: unknown, pick: (item: Record<string, unknown>) => unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item) => {
    const picked = item !== null && typeof item === 'object' ? pick(item as Record<string, unknown>) : undefined;
    return typeof picked === 'string' ? [picked] : [];
  });
}

/**
 * What an earlier acceptance under `callerId` left: its receipt (until delivered) and its transcript
 * message. Either may be another producer's row with that id (Kandev uses the client message id as
 * the message key too) or carry malformed metadata: then it has no fingerprint and matches no request.
 */
/**
 * Whether anything was accepted under this caller id: exactly when `priorAcceptance` finds
 * something (a receipt or a transcript message with this id), in one statement instead of two.
 */
export async function acceptanceRecorded(ctx: RepositoryContext, schema: PlanCommentSchema, callerId: string): Promise<boolean> {
  const receipt = schema.receiptTable ? `SELECT id FROM ${schema.receiptTable} WHERE id = ? UNION ALL ` : '';
  const outcome = hasOutcomes(schema) ? `SELECT id FROM pending_projector_prompt_outcomes WHERE id = ? UNION ALL ` : '';
  const bindings = [...(schema.receiptTable ? [callerId] : []), ...(outcome ? [callerId] : []), callerId];
  const rows = await rawRows<{ id: string }>(
    ctx,
    `SELECT id FROM (${receipt}${outcome}SELECT id FROM task_session_messages WHERE id = ?) AS used LIMIT 1`,
    bindings,
  );
  return rows.length > 0;
}

/** The outcome table exists wherever the prompt tables are complete (migration 0005, kandev_mode_0003). */
const hasOutcomes = (schema: PlanCommentSchema) => schema.receiptTable !== null && schema.missingForPrompts.length === 0;

/** A withdrawn entry's replay record: neither its receipt nor a transcript message is left. */
function withdrawnAcceptance(outcome: PromptOutcome): PriorAcceptance {
  return {
    sessionId: outcome.sessionId,
    taskId: outcome.taskId,
    fingerprint: outcome.fingerprint === '' ? undefined : outcome.fingerprint,
    content: '',
    turnId: null,
    promptSeq: null,
    receiptPresent: false,
    deliveryKind: outcome.deliveryKind === 'direct' ? 'direct' : 'queued',
    position: null,
    messagePresent: false,
    delivery: 'pending',
    status: outcome.status,
    statusReason: outcome.reason,
    refs: Array.isArray(outcome.detail.consumed_comment_ids) ? outcome.detail.consumed_comment_ids.filter((id): id is string => typeof id === 'string') : [],
    attachmentIds: [],
  };
}

/** A receipt still present: waiting in its queue, or being delivered. */
function receiptStatus(receipt: PromptReceiptRecord): PromptStatus {
  const reserved = receipt.reservationToken !== null || receipt.deliveryAttemptedAt !== null;
  return receipt.deliveryKind === 'queued' && !reserved ? 'waiting' : 'in_flight';
}

export async function priorAcceptance(tx: RepositoryContext, schema: PlanCommentSchema, callerId: string): Promise<PriorAcceptance | undefined> {
  const receipt = schema.receiptTable ? await getPromptReceipt(tx, schema.receiptTable, callerId) : undefined;
  const messageRow = (
    await rawRows<Row>(tx, `SELECT id, task_session_id, task_id, turn_id, content, metadata, prompt_seq FROM task_session_messages WHERE id = ?`, [callerId])
  )[0];
  if (!receipt && !messageRow) {
    const outcome = hasOutcomes(schema) ? await getPromptOutcome(tx, callerId) : undefined;
    return outcome ? withdrawnAcceptance(outcome) : undefined;
  }
  const message = messageRow ? parseMetadata(messageRow.metadata).metadata : {};
  const fingerprintOf = (metadata: Record<string, unknown>) =>
    typeof metadata.plan_comment_request_fingerprint === 'string' ? metadata.plan_comment_request_fingerprint : undefined;
  const fromReceipt = receipt ? fingerprintOf(receipt.metadata) : undefined;
  const fromMessage = messageRow ? fingerprintOf(message) : undefined;
  // Both rows must agree when both exist; a disagreement is nobody's request.
  const fingerprint = receipt && messageRow ? (fromReceipt === fromMessage ? fromReceipt : undefined) : (fromReceipt ?? fromMessage);
  const label = message.prompt_delivery;
  const metadata = receipt?.metadata ?? message;
  // The receipt's column, else the transcript's metadata (the dispatcher's transcript of a queued
  // prompt says `delivery_kind: 'queued'`): a fingerprint of another kind never matches anyway.
  const kind = receipt ? receipt.deliveryKind : message.delivery_kind;
  return {
    sessionId: receipt?.sessionId ?? String(messageRow!.task_session_id),
    taskId: receipt?.taskId ?? String(messageRow!.task_id ?? ''),
    fingerprint,
    content: receipt?.content ?? String(messageRow!.content ?? ''),
    turnId: messageRow ? String(messageRow.turn_id) : (receipt?.transcriptTurnId ?? null),
    promptSeq: messageRow ? Number(messageRow.prompt_seq) : null,
    receiptPresent: receipt !== undefined,
    deliveryKind: kind === 'queued' ? 'queued' : 'direct',
    position: receipt && kind === 'queued' ? receipt.position : null,
    messagePresent: messageRow !== undefined,
    delivery: receipt ? 'pending' : label === 'acknowledged' || label === 'unconfirmed' ? label : 'pending',
    status: receipt ? receiptStatus(receipt) : 'delivered',
    statusReason: '',
    refs: stringList(metadata.plan_comment_refs, (r) => r.id),
    attachmentIds: stringList(message.attachments ?? receipt?.attachments, (a) => a.id),
  };
}

export async function replayOutcome(
  tx: RepositoryContext,
  schema: PlanCommentSchema,
  input: AcceptPromptInput,
  prior: PriorAcceptance,
  fingerprint: string,
): Promise<AcceptedPrompt | Conflict> {
  if (prior.fingerprint !== fingerprint) {
    return conflict('caller_id_conflict', `caller id ${input.callerId} was accepted before for another request`, {});
  }
  return {
    ok: true,
    replayed: true,
    taskId: prior.taskId,
    sessionId: prior.sessionId,
    callerId: input.callerId,
    receiptId: input.callerId,
    messageId: prior.messagePresent ? input.callerId : null,
    turnId: prior.turnId,
    promptSeq: prior.promptSeq,
    deliveryKind: prior.deliveryKind,
    queueId: prior.deliveryKind === 'queued' ? input.callerId : null,
    position: prior.position,
    queueCount: null,
    delivery: prior.delivery,
    status: prior.status,
    statusReason: prior.statusReason,
    content: prior.content,
    consumedCommentIds: prior.refs,
    attachmentIds: prior.attachmentIds,
    snapshot: schema.missingForComments.length === 0 && prior.taskId !== '' ? await snapshotIn(tx, prior.taskId) : null,
  };
}
