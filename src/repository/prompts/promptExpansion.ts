import { badRequest, type BadRequest } from '../planComments/planCommentOutcomes.js';
import type { PlanCommentRecord } from '../planComments/planCommentRows.js';
import { formatPlanCommentPrompt, PLAN_COMMENT_LIMITS, utf8Length } from '../../turns/planCommentPrompt.js';

type PromptComment = Pick<PlanCommentRecord, 'id' | 'body' | 'selectedText' | 'createdAt'>;

/**
 * The visible prompt, from the consumed comment rows and the typed content: what the accepting
 * transaction (step 4) and an edit of a queue entry (`queue.update`) both store, with the same refusals.
 */
export function expandPrompt(comments: readonly PromptComment[], content: string): { prompt: string } | BadRequest {
  const prompt = formatPlanCommentPrompt(
    comments.map((c) => ({ id: c.id, body: c.body, selected_text: c.selectedText, created_at: c.createdAt })),
    content,
  );
  if (prompt.trim() === '') return badRequest('empty_prompt', 'nothing to send: no content and no plan comment');
  if (utf8Length(prompt) > PLAN_COMMENT_LIMITS.promptMaxBytes) {
    return badRequest('prompt_too_large', `the expanded prompt is over ${PLAN_COMMENT_LIMITS.promptMaxBytes} bytes`);
  }
  return { prompt };
}
