import { beginOrJoin, type RepositoryContext } from '../context.js';
import type { Conflict } from '../planComments/planCommentOutcomes.js';
import { instantColumn, toAttachmentRecord, writtenInstant, writtenNow, type AttachmentRecord } from '../planComments/planCommentRows.js';
import { instantAfter } from '../../timestamps.js';

/**
 * Attachment metadata (`task_message_attachments`): staged by the uploader (this service never
 * holds the bytes), then claimed by the prompt that carries it, inside the transaction that
 * accepts that prompt (a compensating restore is not an atomicity mechanism: a claim
 * is never undone by a later statement; a failed acceptance rolls it back with everything else).
 */

export interface StageAttachmentInput {
  id: string;
  ownerId: string;
  workspaceId: string;
  /** Empty: any task of the workspace may claim it. */
  taskId?: string;
  /** Empty: any session of the task may claim it. */
  sessionId?: string;
  name: string;
  mimeType: string;
  sizeBytes: number;
  storageKey: string;
  kind?: string;
  deliveryMode?: string;
  /** How long it stays claimable. */
  ttlMs: number;
}

export type StageAttachmentResult =
  /** `replayed`: the same id was staged before with the same metadata; the stored row is returned as it is. */
  { ok: true; replayed: boolean; attachment: AttachmentRecord } | Extract<Conflict, { reason: 'attachment_id_conflict' }>;

function sameMetadata(row: AttachmentRecord, input: StageAttachmentInput): boolean {
  return (
    row.ownerId === input.ownerId &&
    row.workspaceId === input.workspaceId &&
    row.taskId === (input.taskId ?? '') &&
    row.sessionId === (input.sessionId ?? '') &&
    row.name === input.name &&
    row.mimeType === input.mimeType &&
    row.sizeBytes === input.sizeBytes &&
    row.storageKey === input.storageKey &&
    row.kind === (input.kind ?? 'resource') &&
    row.deliveryMode === (input.deliveryMode ?? 'prompt')
  );
}

/** Records a staged attachment (metadata only), idempotent by id. */
export function stageAttachment(ctx: RepositoryContext, input: StageAttachmentInput): Promise<StageAttachmentResult> {
  return beginOrJoin(ctx, async (tx): Promise<StageAttachmentResult> => {
    const existing = await tx.knex('task_message_attachments').where({ id: input.id }).first();
    if (existing) {
      const record = toAttachmentRecord(existing);
      if (sameMetadata(record, input)) return { ok: true, replayed: true, attachment: record };
      return { ok: false, code: 'conflict', reason: 'attachment_id_conflict', message: `attachment ${input.id} was staged with other metadata` };
    }
    if (await tx.knex('task_message_attachments').where({ storage_key: input.storageKey }).first()) {
      return { ok: false, code: 'conflict', reason: 'attachment_id_conflict', message: `storage key ${input.storageKey} belongs to another attachment` };
    }
    const now = tx.clock();
    const row = {
      id: input.id,
      owner_id: input.ownerId,
      workspace_id: input.workspaceId,
      task_id: input.taskId ?? '',
      session_id: input.sessionId ?? '',
      message_id: '',
      queue_id: '',
      name: input.name,
      mime_type: input.mimeType,
      kind: input.kind ?? 'resource',
      delivery_mode: input.deliveryMode ?? 'prompt',
      size_bytes: input.sizeBytes,
      storage_key: input.storageKey,
      state: 'staged',
      expires_at: writtenInstant(tx, instantAfter(now, input.ttlMs)),
      created_at: writtenInstant(tx, now),
      updated_at: writtenInstant(tx, now),
    };
    await tx.knex('task_message_attachments').insert(row);
    return { ok: true, replayed: false, attachment: toAttachmentRecord(row) };
  });
}

export interface ClaimAttachmentsInput {
  ids: readonly string[];
  ownerId: string;
  workspaceId: string;
  taskId: string;
  sessionId: string;
  messageId: string;
  queueId: string;
}

/**
 * Claims every attachment for one prompt, inside its accepting transaction: each must be staged,
 * unexpired, of this owner and workspace, and scoped to no other task or session. Returns the
 * claimed rows in the order of `ids`, or the ids that could not be claimed (the caller then rolls
 * the whole transaction back: some of the others were claimed by this very transaction).
 */
export async function claimAttachments(
  tx: RepositoryContext,
  input: ClaimAttachmentsInput,
): Promise<{ ok: true; claimed: AttachmentRecord[] } | { ok: false; unavailable: string[] }> {
  const now = tx.clock();
  const unavailable: string[] = [];
  const claimed: AttachmentRecord[] = [];
  for (const id of input.ids) {
    const rows = await tx
      .knex('task_message_attachments')
      .where({ id, owner_id: input.ownerId, workspace_id: input.workspaceId, state: 'staged' })
      .whereRaw(`${instantColumn(tx, 'expires_at')} > ?`, [now])
      .whereIn('task_id', ['', input.taskId])
      .whereIn('session_id', ['', input.sessionId])
      .update({
        state: 'claimed',
        task_id: input.taskId,
        session_id: input.sessionId,
        message_id: input.messageId,
        queue_id: input.queueId,
        updated_at: writtenNow(tx),
      })
      .returning('*');
    const row = (rows as Array<Record<string, unknown>>)[0];
    if (row) claimed.push(toAttachmentRecord(row));
    else unavailable.push(id);
  }
  return unavailable.length > 0 ? { ok: false, unavailable } : { ok: true, claimed };
}

/**
 * Gives a queue entry's claimed attachments (all of them for a withdrawn entry, the named ones for
 * an edit that dropped them) back to their uploader as staged, inside the transaction that changes it. They keep the task and session scope their claim narrowed them to, and
 * their expiry: one that lapsed meanwhile is staged but no longer claimable, as any staged one.
 */
export async function releaseQueuedAttachments(tx: RepositoryContext, queueId: string, ids?: readonly string[]): Promise<string[]> {
  const query = tx.knex('task_message_attachments').where({ queue_id: queueId, message_id: '', state: 'claimed' });
  if (ids) query.whereIn('id', [...ids]);
  const rows = await query.update({ state: 'staged', queue_id: '', updated_at: writtenNow(tx) }).returning('id');
  return (rows as Array<{ id: string }>).map((r) => String(r.id)).sort();
}
