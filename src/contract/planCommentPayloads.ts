import type { ReplyFailure } from './replyErrorCodes.js';

/**
 * The wire shapes (snake_case, like Kandev's JSON) of the plan-comment endpoints and of the
 * `task_plan.comments_updated` event, which carries exactly the `plan_comments` a reply does.
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
  plan_comments: PlanCommentsPayload | null;
}

/** A waiting queue entry as `queue.list` shows it. */
export interface QueueEntryPayload {
  id: string;
  position: number;
  content: string;
  queued_at: string;
  attachments: unknown[];
}

/** A failure reply with its machine-readable `reason` and details beside `error` (top level). */
export type ReasonedFailure = ReplyFailure & { reason: string } & Record<string, unknown>;
