import type { AdmissionPayload, AttachmentPayload, PlanCommentsPayload, QueueEntryPayload, QueueWithdrawalPayload } from './planCommentPayloads.js';
import type { ReplyFailure } from './replyErrorCodes.js';

/** Reply bodies of the plan-comment, message, queue and attachment endpoints. */

/**
 * A failure of the plan-comment, message and attachment endpoints: `reason` (machine-readable) and
 * its details beside `error`; `plan_comments` is the current collection on `plan_comments_changed`.
 */
export type PlanCommentFailure = ReplyFailure & {
  reason?: string;
  plan_comments?: PlanCommentsPayload;
  primary_session_id?: string | null;
  state?: string;
  attachment_ids?: string[];
} & Record<string, unknown>;
export type PlanCommentsReply<T extends object = object> = ({ ok: true; plan_comments: PlanCommentsPayload } & T) | PlanCommentFailure;
/** An accepted prompt (its admission); `queue_full` failures carry `count` and `max`, `queue_text_full` ones `content_bytes` and `max_bytes`. */
export type PromptReply = AdmissionPayload | PlanCommentFailure;
/** The waiting entries in queue order, at the queue's `revision` (what `queue.reorder` compares). */
export type QueueListReply = { ok: true; entries: QueueEntryPayload[]; count: number; max: number; revision: number; auto_run: boolean } | PlanCommentFailure;
/** The session's automatic delivery as it is now (paused: `auto_run: false`). */
export type QueueAutoRunReply = { ok: true; session_id: string; task_id: string; auto_run: boolean } | PlanCommentFailure;
/** The head a drain delivered (`queue_id` is its receipt id) and how the agent's stream took it. */
export type QueueDrainReply = { ok: true; session_id: string; queue_id: string; delivery: 'acknowledged' | 'unconfirmed' } | PlanCommentFailure;
export type QueueWithdrawalReply = QueueWithdrawalPayload | PlanCommentFailure;
/** The edited entry at its new version; `released_attachment_ids`: attachments it no longer carries, staged again. */
export type QueueUpdateReply = { ok: true; entry: QueueEntryPayload; released_attachment_ids: string[] } | PlanCommentFailure;
/** The waiting entries in their new order, at the queue's new revision. */
export type QueueReorderReply = { ok: true; entries: QueueEntryPayload[]; revision: number } | PlanCommentFailure;
export type AttachmentStageReply = { ok: true; replayed: boolean; attachment: AttachmentPayload } | PlanCommentFailure;
export type ImportLegacyReply = PlanCommentsReply<{ imported: string[]; skipped: Array<{ id: string; sessionId: string; reason: string }> }>;
