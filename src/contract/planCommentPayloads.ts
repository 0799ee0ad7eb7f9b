import type { ReplyFailure } from './replyErrorCodes.js';

/**
 * The wire shapes (snake_case, like Kandev's JSON) of the plan-comment endpoints and of the
 * `task_plan.comments.changed` event, which carries exactly the `plan_comments` a reply does.
 */

export interface PlanCommentPayload {
  id: string;
  task_id: string;
  plan_id: string;
  body: string;
  selected_text: string;
  anchor_from: number | null;
  anchor_to: number | null;
  version: number;
  created_at: string;
  updated_at: string;
}

/** The whole collection at one revision; `plan_id` null (revision 0) when the task has no plan. */
export interface PlanCommentsPayload {
  task_id: string;
  plan_id: string | null;
  revision: number;
  comments: PlanCommentPayload[];
}

export interface AttachmentPayload {
  id: string;
  owner_id: string;
  workspace_id: string;
  task_id: string;
  session_id: string;
  message_id: string;
  name: string;
  mime_type: string;
  kind: string;
  delivery_mode: string;
  size_bytes: number;
  storage_key: string;
  state: string;
  expires_at: string;
  created_at: string;
  updated_at: string;
}

/**
 * The reply of an accepted prompt (its admission), sent after COMMIT, before any delivery:
 * `message_id` is null for a queued prompt until the dispatcher wrote its transcript; `queue_id`
 * and `position` are a queued prompt's (null for a direct one, and `position` once the entry is gone).
 */
export interface AdmissionPayload {
  ok: true;
  task_id: string;
  session_id: string;
  caller_id: string;
  receipt_id: string;
  message_id: string | null;
  queue_id: string | null;
  position: number | null;
  delivery_kind: 'direct' | 'queued';
  replayed: boolean;
  delivery: 'pending' | 'acknowledged' | 'unconfirmed';
  /**
   * Where the prompt is now: `waiting` (queued), `in_flight` (being delivered), `delivered`,
   * `removed` (by `queue.remove` or `queue.clear`) or `cancelled` (by the service; see `status_reason`).
   */
  status: 'waiting' | 'in_flight' | 'delivered' | 'removed' | 'cancelled';
  /** Why a cancelled prompt was cancelled (`task_archived`, `session_completed`, ...); '' otherwise. */
  status_reason: string;
  plan_comments: PlanCommentsPayload | null;
}

/** A waiting queue entry as `queue.list` shows it; `version` moves with every `queue.update`. */
export interface QueueEntryPayload {
  id: string;
  session_id: string;
  task_id: string;
  position: number;
  version: number;
  content: string;
  model: string;
  plan_mode: boolean;
  queued_at: string;
  queued_by: string;
  attachments: unknown[];
}

/** What `queue.remove` and `queue.clear` did, in the one transaction that did it. */
export interface QueueWithdrawalPayload {
  ok: true;
  session_id: string;
  task_id: string;
  /** The entries removed, in queue order (empty: a clear of an empty queue). */
  removed: Array<{ queue_id: string; position: number }>;
  /** Consumed plan comments back in the task's collection (same ids, bodies and anchors). */
  returned_comment_ids: string[];
  /** Consumed comments that could not come back: their plan was deleted or replaced. */
  dropped_comment_ids: string[];
  /** Claimed attachments staged again, for their uploader to attach elsewhere. */
  released_attachment_ids: string[];
  /** The collection after the return; null when no comment came back. */
  plan_comments: PlanCommentsPayload | null;
  /** The queue's revision and waiting count afterwards. */
  revision: number;
  count: number;
}

/** A failure reply with its machine-readable `reason` and details beside `error` (top level). */
export type ReasonedFailure = ReplyFailure & { reason: string } & Record<string, unknown>;
