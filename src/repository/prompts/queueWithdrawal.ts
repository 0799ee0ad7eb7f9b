import { beginOrNest, rawRows, type RepositoryContext } from '../context.js';
import { releaseQueuedAttachments } from '../attachments/attachments.js';
import { conflict, notFound, unavailable, type Conflict, type NotFound, type Unavailable } from '../planComments/planCommentOutcomes.js';
import type { PlanCommentSnapshot, PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { PlanCommentSchema, ReceiptTable } from '../schema/planCommentTables.js';
import { readConsumedComments, returnConsumedComments } from './consumedComments.js';
import { recordPromptOutcome } from './promptOutcomes.js';
import { dropUnsentTranscript } from './promptTranscript.js';
import { countWaitingQueuedPrompts } from './queuedPrompts.js';
import { lockQueueEntries, lockSessionQueue } from './sessionQueue.js';
import { bumpQueueRevision, readQueueRevision } from './queueRevision.js';

/**
 * Withdrawing waiting queue entries: a user's `queue.remove` and `queue.clear`, and the service's
 * cancellation of entries that can no longer be delivered. One transaction, all or nothing, in
 * Kandev's lock order (the task row, the session's turn-write lock, then rows), the same
 * turn-write lock `reserveHead` takes first: an entry is either withdrawn before a dispatcher can
 * reserve it, or found reserved and left alone, never both. Each withdrawn entry's receipt is
 * deleted (so it stops counting and no dispatcher sees it), its outcome recorded for caller-id
 * replays, its consumed comments returned to the collection and its attachments to staged.
 */

export interface WithdrawInput {
  sessionId: string;
  /** The entries to withdraw; absent: every waiting entry of the session (entries in flight stay). */
  queueIds?: readonly string[];
  /** `removed` by a user, `cancelled` by the service. */
  status: 'removed' | 'cancelled';
  /** '' for a removal; why, for a cancellation (`task_archived`, `session_completed`, ...). */
  reason: string;
  /** Runs inside the transaction once every write is done, before it commits: a crash test's failpoint, nothing otherwise. */
  beforeCommit?: () => Promise<void>;
}

interface WithdrawnEntry {
  id: string;
  position: number;
  content: string;
  attachmentIds: string[];
}

export type WithdrawResult =
  | {
      ok: true;
      taskId: string;
      sessionId: string;
      withdrawn: WithdrawnEntry[];
      /** Consumed comments back in the collection, and those that could not come back (their plan is gone). */
      returnedCommentIds: string[];
      droppedCommentIds: string[];
      /** The collection after the return; null when no comment came back. */
      snapshot: PlanCommentSnapshot | null;
      /** The queue's revision afterwards (moved once when anything was withdrawn). */
      revision: number;
      /** Waiting entries left. */
      count: number;
    }
  | NotFound
  | Extract<Conflict, { reason: 'entry_in_flight' }>
  | Unavailable;

export function withdrawQueueEntries(ctx: RepositoryContext, schema: PlanCommentSchema, input: WithdrawInput): Promise<WithdrawResult> {
  const table = schema.receiptTable;
  if (!table || schema.missingForPrompts.length > 0) return Promise.resolve(unavailable('the prompt queue', schema.missingForPrompts));
  return beginOrNest(ctx, async (tx): Promise<WithdrawResult> => {
    const { sessionId } = input;
    const taskId = await lockSessionQueue(tx, sessionId);
    if (taskId === undefined) return notFound('session_not_found', `session ${sessionId} does not exist`);
    const found = await lockQueueEntries(tx, table, sessionId, input.queueIds);
    if (input.queueIds) {
      const ids = new Set(found.map((f) => f.receipt.id));
      const unknown = input.queueIds.filter((id) => !ids.has(id));
      if (unknown.length > 0) return notFound('queue_entry_not_found', `session ${sessionId} has no queue entry ${unknown.join(', ')}`);
      const inFlight = found.filter((f) => !f.waiting).map((f) => f.receipt.id);
      if (inFlight.length > 0)
        return conflict('entry_in_flight', `queue entries ${inFlight.join(', ')} are being delivered and can no longer change`, {
          queueIds: inFlight,
        }) as Extract<Conflict, { reason: 'entry_in_flight' }>;
    }
    const targets = found.filter((f) => f.waiting).map((f) => f.receipt);
    const result = await withdrawLocked(tx, table, { taskId, sessionId, targets, status: input.status, reason: input.reason });
    await input.beforeCommit?.();
    return result;
  });
}

type Withdrawn = Extract<WithdrawResult, { ok: true }>;

/**
 * Withdraws `targets` (waiting entries of the session, already row-locked by the caller under the
 * queue's locks): deletes each receipt, records its outcome, returns its comments and attachments,
 * and moves the queue's revision once when anything went.
 */
export async function withdrawLocked(
  tx: RepositoryContext,
  table: ReceiptTable,
  input: { taskId: string; sessionId: string; targets: PromptReceiptRecord[]; status: WithdrawInput['status']; reason: string },
): Promise<Withdrawn> {
  const { taskId, sessionId } = input;
  const targets = [...input.targets].sort((a, b) => a.position - b.position || (a.id < b.id ? -1 : 1));
  if (targets.length === 0) {
    const revision = await readQueueRevision(tx, sessionId);
    const count = await countWaitingQueuedPrompts(tx, table, sessionId);
    return { ok: true, taskId, sessionId, withdrawn: [], returnedCommentIds: [], droppedCommentIds: [], snapshot: null, revision, count };
  }
  const consumed = targets.map((r) => ({ receipt: r, ...readConsumedComments(r.metadata) }));
  const back = await returnConsumedComments(
    tx,
    taskId,
    consumed.flatMap((c) => c.comments),
  );
  const dropped = [...back.dropped, ...consumed.flatMap((c) => c.unreadable)];
  const withdrawn: WithdrawnEntry[] = [];
  for (const { receipt, comments, unreadable } of consumed) {
    await dropUnsentTranscript(tx, table, receipt);
    await rawRows(tx, `DELETE FROM ${table} WHERE id = ?`, [receipt.id]);
    const attachmentIds = await releaseQueuedAttachments(tx, receipt.id);
    const own = new Set(comments.map((c) => c.id));
    await recordPromptOutcome(tx, {
      id: receipt.id,
      sessionId,
      taskId,
      deliveryKind: 'queued',
      status: input.status,
      reason: input.reason,
      fingerprint: fingerprintOf(receipt),
      detail: {
        position: receipt.position,
        consumed_comment_ids: [...comments.map((c) => c.id), ...unreadable],
        returned_comment_ids: back.returned.filter((id) => own.has(id)),
        dropped_comment_ids: [...back.dropped.filter((id) => own.has(id)), ...unreadable],
        attachment_ids: attachmentIds,
      },
    });
    withdrawn.push({ id: receipt.id, position: receipt.position, content: receipt.content, attachmentIds });
  }
  const revision = await bumpQueueRevision(tx, sessionId);
  const count = await countWaitingQueuedPrompts(tx, table, sessionId);
  return { ok: true, taskId, sessionId, withdrawn, returnedCommentIds: back.returned, droppedCommentIds: dropped, snapshot: back.snapshot, revision, count };
}

function fingerprintOf(receipt: PromptReceiptRecord): string {
  const value = receipt.metadata.plan_comment_request_fingerprint;
  return typeof value === 'string' ? value : '';
}
