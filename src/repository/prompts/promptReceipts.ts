import { rawRows, type RepositoryContext } from '../context.js';
import { toPromptReceiptRecord, type AttachmentRecord, type PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';

/**
 * Durable prompt receipts: one row per accepted prompt until it is delivered (the dispatcher's
 * writes, promptReservations.ts and promptDeliveryWrites.ts, reserve, mark and settle it). Its id is the caller id, which is also the transcript message's id, so
 * a receipt doubles as the caller-id replay record (a queue row that consumed comments is also the
 * replay record of its caller id). The table is owned mode's `queued_messages` or, beside
 * Kandev's tables, `pending_projector_prompt_receipts`: the same columns, so every statement here
 * is one text over the table's name (a constant of ours, never input).
 */

export interface ReceiptInput {
  id: string;
  /** `direct`: a send, its transcript already written; `queued`: a queue entry, its transcript written at reservation. */
  deliveryKind: 'direct' | 'queued';
  sessionId: string;
  taskId: string;
  /** The visible prompt, already expanded. */
  content: string;
  model: string;
  planMode: boolean;
  attachments: readonly AttachmentRecord[];
  metadata: Record<string, unknown>;
  /** The transcript a direct receipt links from the start; null for a queued one. */
  transcriptMessageId: string | null;
  transcriptTurnId: string | null;
}

/** The attachment list a receipt and its transcript carry: what a dispatcher needs to send them. */
export function attachmentSummaries(attachments: readonly AttachmentRecord[]): Array<Record<string, unknown>> {
  return attachments.map((a) => ({
    id: a.id,
    name: a.name,
    mime_type: a.mimeType,
    size_bytes: a.sizeBytes,
    storage_key: a.storageKey,
    kind: a.kind,
    delivery_mode: a.deliveryMode,
  }));
}

/**
 * Inserts the receipt of an accepted prompt, unreserved and unattempted: a direct one with its
 * transcript already linked, a queued one without. Its position follows every other row of the
 * session (direct or queued), so it is the session's next place in the queue; a dispatcher takes
 * direct rows before queued ones whatever their position. Callers hold the session's turn-write
 * lock, which keeps two positions of a session apart.
 */
export async function insertPromptReceipt(tx: RepositoryContext, table: ReceiptTable, input: ReceiptInput): Promise<PromptReceiptRecord> {
  const rows = await rawRows<Record<string, unknown>>(
    tx,
    `INSERT INTO ${table} (id, session_id, task_id, position, content, model, plan_mode, attachments_json, metadata_json,
                           queued_at, queued_by, delivery_kind, delivery_attempts, last_error,
                           durable_transcript_message_id, durable_transcript_turn_id)
     VALUES (?, ?, ?, (SELECT COALESCE(MAX(q.position), 0) + 1 FROM ${table} q WHERE q.session_id = ?), ?, ?, ?, ?, ?,
             ?, 'user', ?, 0, '', ?, ?)
     RETURNING *`,
    [
      input.id,
      input.sessionId,
      input.taskId,
      input.sessionId,
      input.content,
      input.model,
      input.planMode ? 1 : 0,
      JSON.stringify(attachmentSummaries(input.attachments)),
      JSON.stringify(input.metadata),
      // Always canonical: owned mode's queued_messages and our own table are this service's text.
      tx.clock(),
      input.deliveryKind,
      input.transcriptMessageId,
      input.transcriptTurnId,
    ],
  );
  return toPromptReceiptRecord(rows[0]!);
}

export async function getPromptReceipt(ctx: RepositoryContext, table: ReceiptTable, id: string): Promise<PromptReceiptRecord | undefined> {
  const rows = await rawRows<Record<string, unknown>>(ctx, `SELECT * FROM ${table} WHERE id = ?`, [id]);
  return rows[0] ? toPromptReceiptRecord(rows[0]) : undefined;
}
