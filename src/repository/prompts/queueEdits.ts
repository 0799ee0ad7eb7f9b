import { dropUnsentTranscript } from './promptTranscript.js';
import { beginOrNest, rawRows, type RepositoryContext } from '../context.js';
import { claimAttachments, releaseQueuedAttachments } from '../attachments/attachments.js';
import {
  badRequest,
  conflict,
  notFound,
  unavailable,
  type BadRequest,
  type Conflict,
  type NotFound,
  type Unavailable,
} from '../planComments/planCommentOutcomes.js';
import { toAttachmentRecord, toPromptReceiptRecord, type AttachmentRecord, type PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { PlanCommentSchema, ReceiptTable } from '../schema/planCommentTables.js';
import { readConsumedComments, TYPED_CONTENT_KEY } from './consumedComments.js';
import { expandPrompt } from './promptExpansion.js';
import { attachmentSummaries } from './promptReceipts.js';
import { countWaitingQueuedPrompts, listWaitingQueuedPrompts } from './queuedPrompts.js';
import { bumpQueueRevision, readQueueRevision } from './queueRevision.js';
import { lockQueueEntries, lockSessionQueue } from './sessionQueue.js';
import { queueRoom } from './queueRoom.js';
import { utf8Length } from '../../turns/planCommentPrompt.js';

/**
 * Changing waiting queue entries in place: `queue.update` edits one entry at the version its
 * author saw, `queue.reorder` rewrites the waiting order at the revision its author saw. Each is one
 * transaction under the locks every queue change takes (sessionQueue.ts), and a change drawn from
 * a stale view is refused with the queue as it is now (`queue_changed`), never applied to entries
 * its author did not see.
 */

type QueueChanged = Extract<Conflict, { reason: 'queue_changed' }>;
type InFlight = Extract<Conflict, { reason: 'entry_in_flight' }>;
type AttachmentsUnavailable = Extract<Conflict, { reason: 'attachments_unavailable' }>;

export interface UpdateQueueEntryInput {
  sessionId: string;
  queueId: string;
  /** The entry's version as its author saw it (`queue.list`). */
  version: number;
  /** The new typed text; the consumed comments are expanded above it again, as at acceptance. */
  content?: string;
  model?: string;
  planMode?: boolean;
  /** The entry's attachments from now on: those it had and are not named go back to staged, new ones are claimed. */
  attachmentIds?: readonly string[];
  /** Who staged the newly named attachments; required when there are any. */
  attachmentOwnerId?: string;
}

export type UpdateQueueEntryResult =
  /** `count`: the session's waiting entries (an edit changes none of them). */
  | { ok: true; taskId: string; entry: PromptReceiptRecord; releasedAttachmentIds: string[]; count: number }
  | NotFound
  | BadRequest
  | QueueChanged
  | InFlight
  | AttachmentsUnavailable
  /** The new text would take the session's waiting prompts past PLAN_COMMENT_LIMITS.queueTextMaxBytes. */
  | Extract<Conflict, { reason: 'queue_text_full' }>
  | Unavailable;

export interface ReorderQueueInput {
  sessionId: string;
  /** Every waiting entry, in the new order. */
  queueIds: readonly string[];
  /** The queue's revision as its author saw it (`queue.list`). */
  revision: number;
  /** Runs inside the transaction once every write is done, before it commits: a crash test's failpoint, nothing otherwise. */
  beforeCommit?: () => Promise<void>;
}

export type ReorderQueueResult = { ok: true; taskId: string; entries: PromptReceiptRecord[]; revision: number } | NotFound | QueueChanged | Unavailable;

/** An expected refusal decided after the first write: thrown so the transaction rolls back, then returned. */
class EditRefused extends Error {
  constructor(readonly outcome: AttachmentsUnavailable) {
    super(outcome.message);
  }
}

async function queueChanged(tx: RepositoryContext, table: ReceiptTable, sessionId: string, message: string): Promise<QueueChanged> {
  const revision = await readQueueRevision(tx, sessionId);
  const entries = await listWaitingQueuedPrompts(tx, table, sessionId);
  return conflict('queue_changed', message, { revision, entries }) as QueueChanged;
}

const available = (schema: PlanCommentSchema): schema is PlanCommentSchema & { receiptTable: ReceiptTable } =>
  schema.receiptTable !== null && schema.missingForPrompts.length === 0;

/** The entry's visible prompt with new typed text, or why it cannot have it. */
function reexpanded(receipt: PromptReceiptRecord, content: string): { prompt: string } | BadRequest {
  const { comments, unreadable } = readConsumedComments(receipt.metadata);
  const typed = receipt.metadata[TYPED_CONTENT_KEY];
  // Without its own copy of the typed text and the comments, the expansion cannot be rebuilt exactly.
  if (unreadable.length > 0 || (typeof typed !== 'string' && comments.length > 0))
    return badRequest('entry_not_editable', `queue entry ${receipt.id} keeps no readable copy of its consumed comments, so its text cannot be edited`);
  return expandPrompt(comments, content);
}

/** The attachments of the entry from now on: kept ones as they are, new ones claimed for it, the rest staged again. */
async function replaceAttachments(
  tx: RepositoryContext,
  receipt: PromptReceiptRecord,
  input: UpdateQueueEntryInput,
  held: readonly AttachmentRecord[],
): Promise<{ attachments: AttachmentRecord[]; released: string[] }> {
  const wanted = input.attachmentIds!;
  const heldIds = new Set(held.map((a) => a.id));
  const dropped = held.filter((a) => !wanted.includes(a.id)).map((a) => a.id);
  const released = dropped.length > 0 ? await releaseQueuedAttachments(tx, receipt.id, dropped) : [];
  const fresh = wanted.filter((id) => !heldIds.has(id));
  let claimed: AttachmentRecord[] = [];
  if (fresh.length > 0) {
    const task = await tx.knex('tasks').select('workspace_id').where({ id: receipt.taskId }).first();
    const claim = await claimAttachments(tx, {
      ids: fresh,
      ownerId: input.attachmentOwnerId!,
      workspaceId: String(task?.workspace_id ?? ''),
      taskId: receipt.taskId,
      sessionId: receipt.sessionId,
      messageId: '',
      queueId: receipt.id,
    });
    if (!claim.ok) {
      const message = `attachments ${claim.unavailable.join(', ')} cannot be claimed`;
      throw new EditRefused(conflict('attachments_unavailable', message, { attachmentIds: claim.unavailable }) as AttachmentsUnavailable);
    }
    claimed = claim.claimed;
  }
  const byId = new Map([...held, ...claimed].map((a) => [a.id, a]));
  return { attachments: wanted.map((id) => byId.get(id)!), released };
}

export async function updateQueueEntry(ctx: RepositoryContext, schema: PlanCommentSchema, input: UpdateQueueEntryInput): Promise<UpdateQueueEntryResult> {
  if (!available(schema)) return unavailable('the prompt queue', schema.missingForPrompts);
  if ((input.attachmentIds?.length ?? 0) > 0 && new Set(input.attachmentIds).size !== input.attachmentIds!.length)
    return badRequest('duplicate_attachment_ids', 'an attachment is named more than once');
  const table = schema.receiptTable;
  try {
    return await beginOrNest(ctx, async (tx): Promise<UpdateQueueEntryResult> => {
      const { sessionId, queueId } = input;
      const taskId = await lockSessionQueue(tx, sessionId);
      if (taskId === undefined) return notFound('session_not_found', `session ${sessionId} does not exist`);
      const [found] = await lockQueueEntries(tx, table, sessionId, [queueId]);
      if (!found) return notFound('queue_entry_not_found', `session ${sessionId} has no queue entry ${queueId}`);
      const { receipt } = found;
      if (!found.waiting)
        return conflict('entry_in_flight', `queue entry ${queueId} is being delivered and can no longer change`, { queueIds: [queueId] }) as InFlight;
      if (receipt.version !== input.version)
        return queueChanged(tx, table, sessionId, `queue entry ${queueId} is at version ${receipt.version}, not ${input.version}`);
      const expanded = input.content === undefined ? { prompt: receipt.content } : reexpanded(receipt, input.content);
      if ('ok' in expanded) return expanded;
      if (input.content !== undefined) {
        const room = await queueRoom(tx, table, sessionId, { bytes: utf8Length(expanded.prompt), replacing: queueId });
        if ('ok' in room) return room as Extract<Conflict, { reason: 'queue_text_full' }>;
      }
      // A transcript its dispatcher wrote before giving it back holds the old text: the next delivery writes the new one.
      await dropUnsentTranscript(tx, table, receipt);
      const held = (await tx.knex('task_message_attachments').where({ queue_id: queueId, state: 'claimed' })).map(toAttachmentRecord);
      const newIds = (input.attachmentIds ?? []).filter((id) => !held.some((a) => a.id === id));
      if (newIds.length > 0 && !input.attachmentOwnerId) return badRequest('attachment_owner_required', 'attachment ids need the owner that staged them');
      const replaced = input.attachmentIds ? await replaceAttachments(tx, receipt, input, held) : undefined;
      const metadata = input.content === undefined ? receipt.metadata : { ...receipt.metadata, [TYPED_CONTENT_KEY]: input.content };
      const rows = await rawRows<Record<string, unknown>>(
        tx,
        `UPDATE ${table} SET content = ?, model = ?, plan_mode = ?, attachments_json = ?, metadata_json = ?, version = version + 1
          WHERE id = ? AND version = ? RETURNING *`,
        [
          expanded.prompt,
          input.model ?? receipt.model,
          (input.planMode ?? receipt.planMode) ? 1 : 0,
          replaced ? JSON.stringify(attachmentSummaries(replaced.attachments)) : JSON.stringify(receipt.attachments),
          JSON.stringify(metadata),
          queueId,
          receipt.version,
        ],
      );
      const count = await countWaitingQueuedPrompts(tx, table, sessionId);
      return { ok: true, taskId, entry: toPromptReceiptRecord(rows[0]!), releasedAttachmentIds: replaced?.released ?? [], count };
    });
  } catch (err) {
    if (err instanceof EditRefused) return err.outcome;
    throw err;
  }
}

/**
 * The new order's positions: the positions the waiting entries hold now, ascending, dealt out in
 * the new order, so the waiting entries keep their place relative to every other row of the
 * session. Ties (rows another producer wrote with one position) are spread apart first.
 */
function dealtPositions(entries: readonly PromptReceiptRecord[]): number[] {
  const positions = entries.map((e) => e.position).sort((a, b) => a - b);
  for (let i = 1; i < positions.length; i++) if (positions[i]! <= positions[i - 1]!) positions[i] = positions[i - 1]! + 1;
  return positions;
}

export async function reorderQueue(ctx: RepositoryContext, schema: PlanCommentSchema, input: ReorderQueueInput): Promise<ReorderQueueResult> {
  if (!available(schema)) return unavailable('the prompt queue', schema.missingForPrompts);
  const table = schema.receiptTable;
  return beginOrNest(ctx, async (tx): Promise<ReorderQueueResult> => {
    const { sessionId } = input;
    const taskId = await lockSessionQueue(tx, sessionId);
    if (taskId === undefined) return notFound('session_not_found', `session ${sessionId} does not exist`);
    const revision = await readQueueRevision(tx, sessionId);
    if (revision !== input.revision) return queueChanged(tx, table, sessionId, `the queue is at revision ${revision}, not ${input.revision}`);
    const waiting = (await lockQueueEntries(tx, table, sessionId)).filter((e) => e.waiting).map((e) => e.receipt);
    const byId = new Map(waiting.map((e) => [e.id, e]));
    const exact = input.queueIds.length === waiting.length && new Set(input.queueIds).size === waiting.length && input.queueIds.every((id) => byId.has(id));
    if (!exact) return queueChanged(tx, table, sessionId, 'queue_ids must name every waiting entry exactly once');
    waiting.sort((a, b) => a.position - b.position || (a.id < b.id ? -1 : 1));
    const positions = dealtPositions(waiting);
    const moves = input.queueIds.map((id, i) => ({ id, position: positions[i]! })).filter((m) => byId.get(m.id)!.position !== m.position);
    if (moves.length > 0) {
      // One statement for the whole order: a reorder of 100 entries is one round trip, not 100.
      const cases = moves.map(() => 'WHEN ? THEN CAST(? AS INTEGER)').join(' ');
      const ids = tx.dialect.inList(
        'id',
        moves.map((m) => m.id),
      );
      await rawRows(tx, `UPDATE ${table} SET position = CASE id ${cases} END WHERE session_id = ? AND ${ids.sql}`, [
        ...moves.flatMap((m) => [m.id, m.position]),
        sessionId,
        ...ids.bindings,
      ]);
    }
    // The same order again changes nothing, so the revision stays.
    const next = moves.length > 0 ? await bumpQueueRevision(tx, sessionId) : revision;
    // The rows locked above at their new positions, in the new order: nothing else can have moved under the locks.
    const entries = input.queueIds.map((id, i) => ({ ...byId.get(id)!, position: positions[i]! }));
    await input.beforeCommit?.();
    return { ok: true, taskId, entries, revision: next };
  });
}
