import type { RepositoryContext } from '../context.js';
import { conflict, type Conflict } from '../planComments/planCommentOutcomes.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';
import { PLAN_COMMENT_LIMITS } from '../../turns/planCommentPrompt.js';
import { waitingQueueSize } from './queuedPrompts.js';

/**
 * The session queue's limits for a prompt joining it (`max`: QUEUE_MAX_PER_SESSION) or a waiting
 * entry's new text (`replacing` its id, the count unchanged): at most `max` waiting entries, and at
 * most PLAN_COMMENT_LIMITS.queueTextMaxBytes of prompt text together. Read under the session's
 * lock, so two writers cannot both take the last room.
 */
export async function queueRoom(
  tx: RepositoryContext,
  table: ReceiptTable,
  sessionId: string,
  prompt: { bytes: number; max?: number; replacing?: string },
): Promise<{ waiting: number } | Extract<Conflict, { reason: 'queue_full' | 'queue_text_full' }>> {
  const size = await waitingQueueSize(tx, table, sessionId, prompt.replacing);
  const { max } = prompt;
  if (max !== undefined && size.count >= max)
    return conflict('queue_full', `session ${sessionId} already has ${size.count} queued prompts (at most ${max})`, { count: size.count, max }) as Extract<
      Conflict,
      { reason: 'queue_full' }
    >;
  const maxBytes = PLAN_COMMENT_LIMITS.queueTextMaxBytes;
  const contentBytes = size.contentBytes + prompt.bytes;
  if (contentBytes > maxBytes) {
    const message = `session ${sessionId}'s waiting queued prompts would hold ${contentBytes} bytes of text (at most ${maxBytes})`;
    return conflict('queue_text_full', message, { contentBytes, maxBytes }) as Extract<Conflict, { reason: 'queue_text_full' }>;
  }
  return { waiting: size.count + (prompt.replacing === undefined ? 0 : 1) };
}
