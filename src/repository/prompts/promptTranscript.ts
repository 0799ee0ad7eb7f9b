import { rawRows, type RepositoryContext } from '../context.js';
import type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';
import { TURN_META_PROMPT_DISPATCH_PENDING } from '../turns/currentTurnAuthority.js';
import { writtenNow } from '../planComments/planCommentRows.js';
import { nextPromptSeq } from './promptSeq.js';
import { startTurn } from '../turns/turns.js';

export interface PromptTranscriptInput {
  /** The receipt id (the caller id): the message's id, so a second write of it fails on the key. */
  id: string;
  sessionId: string;
  taskId: string;
  /** The visible prompt, already expanded. */
  content: string;
  authorId: string;
  metadata: Record<string, unknown>;
}

/**
 * A prompt's deterministic transcript: a new reserved turn (`prompt_dispatch_pending`), the
 * session's next `prompt_seq`, and the user message with id = receipt id. Written by the accepting
 * transaction for a direct prompt and by the dispatcher's transcript step for a queued one; the caller holds the
 * session's turn-write lock.
 */
export async function insertPromptTranscript(tx: RepositoryContext, input: PromptTranscriptInput): Promise<{ turnId: string; promptSeq: number }> {
  const turn = await startTurn(tx, input.sessionId, { taskId: input.taskId, metadata: { [TURN_META_PROMPT_DISPATCH_PENDING]: true } });
  const promptSeq = await nextPromptSeq(tx, input.sessionId);
  const now = writtenNow(tx);
  await tx.knex('task_session_messages').insert({
    id: input.id,
    task_session_id: input.sessionId,
    task_id: input.taskId,
    turn_id: turn.id,
    author_type: 'user',
    author_id: input.authorId,
    content: input.content,
    requests_input: 0,
    type: 'message',
    metadata: JSON.stringify(input.metadata),
    created_at: now,
    updated_at: now,
    prompt_seq: promptSeq,
  });
  return { turnId: turn.id, promptSeq };
}

/**
 * Takes back the transcript of a queued entry that was never attempted: its dispatcher wrote it,
 * then gave the entry back (the session went busy at the marker), and now the entry is withdrawn
 * or edited. The agent never saw it, so the user message and its reserved turn go, the
 * attachments' link to the message is cleared and the entry is unlinked; an edited entry's next
 * delivery writes a fresh transcript with the new text. Returns the message id that went, if any.
 */
export async function dropUnsentTranscript(tx: RepositoryContext, table: ReceiptTable, receipt: PromptReceiptRecord): Promise<string | undefined> {
  const messageId = receipt.transcriptMessageId;
  if (messageId === null) return undefined;
  await rawRows(tx, `DELETE FROM task_session_messages WHERE id = ?`, [messageId]);
  if (receipt.transcriptTurnId !== null) {
    await rawRows(
      tx,
      `DELETE FROM task_session_turns WHERE id = ? AND ${tx.dialect.jsonFlag('metadata', TURN_META_PROMPT_DISPATCH_PENDING)}
          AND NOT EXISTS (SELECT 1 FROM task_session_messages m WHERE m.turn_id = task_session_turns.id)`,
      [receipt.transcriptTurnId],
    );
  }
  await tx
    .knex('task_message_attachments')
    .where({ queue_id: receipt.id, message_id: messageId })
    .update({ message_id: '', updated_at: writtenNow(tx) });
  await rawRows(tx, `UPDATE ${table} SET durable_transcript_message_id = NULL, durable_transcript_turn_id = NULL WHERE id = ?`, [receipt.id]);
  return messageId;
}
