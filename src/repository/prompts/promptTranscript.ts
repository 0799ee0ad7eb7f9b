import type { RepositoryContext } from '../context.js';
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
