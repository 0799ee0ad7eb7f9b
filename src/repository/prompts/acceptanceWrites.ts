import { rawRows, type RepositoryContext } from '../context.js';
import { claimAttachments } from '../attachments/attachments.js';
import { snapshotIn } from '../planComments/planComments.js';
import { commentsChanged, conflict, type BadRequest, type Conflict } from '../planComments/planCommentOutcomes.js';
import type { AttachmentRecord, PlanCommentSnapshot } from '../planComments/planCommentRows.js';
import { bumpCommentsRevision, planCommentsOf } from '../planComments/taskPlans.js';
import type { PlanCommentSchema } from '../schema/planCommentTables.js';
import type { PlanCommentRef } from './acceptedPrompt.js';
import type { AcceptanceRequest, Admitted, Outcome } from './acceptanceChecks.js';
import { attachmentSummaries, insertPromptReceipt } from './promptReceipts.js';
import { insertPromptTranscript } from './promptTranscript.js';
import { CONSUMED_COMMENTS_KEY, consumedCommentsMetadata, TYPED_CONTENT_KEY } from './consumedComments.js';
import { bumpQueueRevision } from './queueRevision.js';
import { PRIMARY_ONLY_KEY } from './primaryGuard.js';
import { KANDEV_IN_FLIGHT_FLAGS } from './queuedPrompts.js';

/**
 * The accepting transaction's writes, after every check passed: consume the comments, claim the
 * attachments, write the receipt (and a direct prompt's turn and message). An expected refusal from
 * here on throws `AcceptanceRefused`, so the transaction rolls back instead of compensating.
 */

/** An expected refusal decided after the first write: thrown so the transaction rolls back, then returned. */
export class AcceptanceRefused extends Error {
  constructor(readonly outcome: Conflict | BadRequest) {
    super(outcome.message);
  }
}

function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/**
 * The writes keyed by the caller id. Its id taken although no acceptance under it was found under
 * the task lock means a row of another task's request (a reused caller id), committed meanwhile.
 */
async function underCallerId<T>(callerId: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw new AcceptanceRefused(conflict('caller_id_conflict', `caller id ${callerId} is taken by another request`, {}));
    throw err;
  }
}

/**
 * Deletes exactly the referenced comments at their versions; every one must go, or nothing does.
 * Returns the collection's new revision.
 */
async function consumeComments(tx: RepositoryContext, plan: { id: string; taskId: string }, refs: readonly PlanCommentRef[]): Promise<number> {
  const pairs = refs.map(() => '(id = ? AND version = ?)').join(' OR ');
  const deleted = await rawRows<{ id: string }>(tx, `DELETE FROM task_plan_comments WHERE task_id = ? AND plan_id = ? AND (${pairs}) RETURNING id`, [
    plan.taskId,
    plan.id,
    ...refs.flatMap((r) => [r.id, r.version]),
  ]);
  if (deleted.length !== refs.length) throw new AcceptanceRefused(commentsChanged({ taskId: plan.taskId, planId: plan.id, revision: 0, comments: [] }));
  return bumpCommentsRevision(tx, plan);
}

/** Claims the named attachments for this prompt: a direct one's message, a queued one's queue entry. */
async function claimNamedAttachments(tx: RepositoryContext, req: AcceptanceRequest, a: Admitted): Promise<AttachmentRecord[]> {
  if (req.attachmentIds.length === 0) return [];
  const claim = await claimAttachments(tx, {
    ids: req.attachmentIds,
    ownerId: req.input.attachmentOwnerId!,
    workspaceId: String(a.task.workspace_id),
    taskId: a.taskId,
    sessionId: a.sessionId,
    // A queued prompt's message does not exist yet: the dispatcher fills it in at reservation.
    messageId: req.kind === 'direct' ? req.input.callerId : '',
    queueId: req.kind === 'queued' ? req.input.callerId : '',
  });
  if (!claim.ok) {
    throw new AcceptanceRefused(
      conflict('attachments_unavailable', `attachments ${claim.unavailable.join(', ')} cannot be claimed`, { attachmentIds: claim.unavailable }),
    );
  }
  return claim.claimed;
}

/**
 * The collection as the accepting transaction leaves it. With comments consumed, the plan row is
 * the one it locked and the revision the one it wrote; only the remaining comments are read.
 */
async function afterAcceptance(
  tx: RepositoryContext,
  schema: PlanCommentSchema,
  taskId: string,
  plan: { id: string; taskId: string } | undefined,
  revision: number | undefined,
): Promise<PlanCommentSnapshot | null> {
  if (schema.missingForComments.length > 0) return null;
  if (!plan || revision === undefined) return snapshotIn(tx, taskId);
  return { taskId, planId: plan.id, revision, comments: await planCommentsOf(tx, taskId, plan.id) };
}

/** What both kinds of receipt and their replies share. */
function acceptedFields(req: AcceptanceRequest, a: Admitted, claimed: readonly AttachmentRecord[]) {
  return {
    ok: true as const,
    replayed: false,
    taskId: a.taskId,
    sessionId: a.sessionId,
    callerId: req.input.callerId,
    receiptId: req.input.callerId,
    deliveryKind: req.kind,
    delivery: 'pending' as const,
    status: req.kind === 'queued' ? ('waiting' as const) : ('in_flight' as const),
    statusReason: '',
    content: a.prompt,
    consumedCommentIds: req.refs.map((r) => r.id),
    attachmentIds: claimed.map((c) => c.id),
  };
}

const refList = (req: AcceptanceRequest) => req.refs.map((r) => ({ id: r.id, version: r.version }));

/** A queued prompt writes only its receipt, which is its queue entry. */
async function writeQueuedReceipt(
  tx: RepositoryContext,
  schema: PlanCommentSchema,
  req: AcceptanceRequest,
  a: Admitted,
  claimed: AttachmentRecord[],
  revision: number | undefined,
): Promise<Outcome> {
  const { callerId } = req.input;
  const receipt = await underCallerId(callerId, () =>
    insertPromptReceipt(tx, req.receiptTable, {
      id: callerId,
      deliveryKind: 'queued',
      sessionId: a.sessionId,
      taskId: a.taskId,
      content: a.prompt,
      model: req.model,
      planMode: req.planMode,
      attachments: claimed,
      metadata: {
        client_queue_id: callerId,
        plan_comment_refs: refList(req),
        plan_comment_request_fingerprint: req.fingerprint,
        // Kept so a removal or cancellation gives them back as they were (consumedComments.ts), and
        // an edit of the typed text expands them again with the new text (queueEdits.ts).
        [CONSUMED_COMMENTS_KEY]: consumedCommentsMetadata(a.comments),
        [TYPED_CONTENT_KEY]: req.input.content,
        ...(req.input.target.kind === 'primary' ? { [PRIMARY_ONLY_KEY]: true } : {}),
      },
      transcriptMessageId: null,
      transcriptTurnId: null,
    }),
  );
  await bumpQueueRevision(tx, a.sessionId);
  return {
    ...acceptedFields(req, a, claimed),
    messageId: null,
    turnId: null,
    promptSeq: null,
    queueId: callerId,
    position: receipt.position,
    queueCount: a.waiting + 1,
    snapshot: await afterAcceptance(tx, schema, a.taskId, a.plan, revision),
  };
}

/** A direct prompt writes its reserved turn and user message (id = caller id), then its receipt linked to them. */
async function writeDirectPrompt(
  tx: RepositoryContext,
  schema: PlanCommentSchema,
  req: AcceptanceRequest,
  a: Admitted,
  claimed: AttachmentRecord[],
  revision: number | undefined,
): Promise<Outcome> {
  const { callerId } = req.input;
  const messageMetadata: Record<string, unknown> = {
    client_message_id: callerId,
    receipt_id: callerId,
    delivery_kind: 'direct',
    plan_comment_refs: refList(req),
    plan_comment_request_fingerprint: req.fingerprint,
    ...(claimed.length > 0 ? { attachments: attachmentSummaries(claimed) } : {}),
  };
  const { turnId, promptSeq } = await underCallerId(callerId, async () => {
    const transcript = await insertPromptTranscript(tx, {
      id: callerId,
      sessionId: a.sessionId,
      taskId: a.taskId,
      content: a.prompt,
      authorId: req.input.authorId ?? '',
      metadata: messageMetadata,
    });
    await insertPromptReceipt(tx, req.receiptTable, {
      id: callerId,
      deliveryKind: 'direct',
      sessionId: a.sessionId,
      taskId: a.taskId,
      content: a.prompt,
      model: req.model,
      planMode: req.planMode,
      attachments: claimed,
      metadata: {
        client_message_id: callerId,
        plan_comment_refs: refList(req),
        plan_comment_request_fingerprint: req.fingerprint,
        ...KANDEV_IN_FLIGHT_FLAGS,
      },
      transcriptMessageId: callerId,
      transcriptTurnId: transcript.turnId,
    });
    return transcript;
  });
  return {
    ...acceptedFields(req, a, claimed),
    messageId: callerId,
    turnId,
    promptSeq,
    queueId: null,
    position: null,
    queueCount: null,
    snapshot: await afterAcceptance(tx, schema, a.taskId, a.plan, revision),
  };
}

/** Step 5, the writes. From here an expected refusal throws, so everything rolls back. */
export async function writeAcceptance(tx: RepositoryContext, schema: PlanCommentSchema, req: AcceptanceRequest, a: Admitted): Promise<Outcome> {
  // The new revision, so the reply's snapshot needs only the comments re-read, not the plan.
  const revision = a.plan ? await consumeComments(tx, a.plan, req.refs) : undefined;
  const claimed = await claimNamedAttachments(tx, req, a);
  return req.kind === 'queued' ? writeQueuedReceipt(tx, schema, req, a, claimed, revision) : writeDirectPrompt(tx, schema, req, a, claimed, revision);
}
