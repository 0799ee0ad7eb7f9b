import type { AttachmentRecord } from '../repository/attachments/attachmentStore.js';
import type { PlanCommentRecord, PlanCommentSnapshot, StoreFailure } from '../repository/planComments/planCommentStore.js';
import type { AcceptedPrompt, PromptReceiptRecord } from '../repository/prompts/promptStore.js';
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

export function commentPayload(c: PlanCommentRecord): PlanCommentPayload {
  return {
    id: c.id,
    task_id: c.taskId,
    plan_id: c.planId,
    body: c.body,
    selected_text: c.selectedText,
    anchor_from: c.anchorFrom,
    anchor_to: c.anchorTo,
    version: c.version,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
  };
}

export function snapshotPayload(s: PlanCommentSnapshot): PlanCommentsPayload {
  return { task_id: s.taskId, plan_id: s.planId, revision: s.revision, comments: s.comments.map(commentPayload) };
}

export function attachmentPayload(a: AttachmentRecord): AttachmentPayload {
  return {
    id: a.id,
    owner_id: a.ownerId,
    workspace_id: a.workspaceId,
    task_id: a.taskId,
    session_id: a.sessionId,
    message_id: a.messageId,
    name: a.name,
    mime_type: a.mimeType,
    kind: a.kind,
    delivery_mode: a.deliveryMode,
    size_bytes: a.sizeBytes,
    storage_key: a.storageKey,
    state: a.state,
    expires_at: a.expiresAt,
    created_at: a.createdAt,
    updated_at: a.updatedAt,
  };
}

/**
 * The reply of an accepted prompt (design §4's Admission), sent after COMMIT, before any delivery:
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

export function admissionPayload(accepted: AcceptedPrompt): AdmissionPayload {
  return {
    ok: true,
    task_id: accepted.taskId,
    session_id: accepted.sessionId,
    caller_id: accepted.callerId,
    receipt_id: accepted.receiptId,
    message_id: accepted.messageId,
    queue_id: accepted.queueId,
    position: accepted.position,
    delivery_kind: accepted.deliveryKind,
    replayed: accepted.replayed,
    delivery: accepted.delivery,
    plan_comments: accepted.snapshot ? snapshotPayload(accepted.snapshot) : null,
  };
}

/** A waiting queue entry as `queue.list` shows it. */
export interface QueueEntryPayload {
  id: string;
  position: number;
  content: string;
  queued_at: string;
  attachments: unknown[];
}

export function queueEntryPayload(r: PromptReceiptRecord): QueueEntryPayload {
  return { id: r.id, position: r.position, content: r.content, queued_at: r.queuedAt, attachments: r.attachments };
}

/** A failure reply with its machine-readable `reason` and details beside `error` (top level). */
export type ReasonedFailure = ReplyFailure & { reason: string } & Record<string, unknown>;

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A store outcome as a reply: `code` and `message` into `error`, `reason` and details beside it. */
export function storeFailure(outcome: StoreFailure): ReasonedFailure {
  const { ok: _ok, code, message, reason, ...details } = outcome as StoreFailure & Record<string, unknown>;
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(details)) {
    if (key === 'snapshot') extra.plan_comments = snapshotPayload(value as PlanCommentSnapshot);
    else extra[snake(key)] = value;
  }
  return { ok: false, error: { code, message }, reason, ...extra };
}

export function reasoned(code: ReplyFailure['error']['code'], reason: string, message: string, details: Record<string, unknown> = {}): ReasonedFailure {
  return { ok: false, error: { code, message }, reason, ...details };
}

/** The admission lease (or mutation lock) of the task stayed held past its budget: nothing ran. */
export function lockTimeoutFailure(outcome: { lockTimeoutMs: number }, taskId: string): ReasonedFailure {
  return reasoned('unavailable', 'lock_timeout', `the admission lease of task ${taskId} stayed held for ${outcome.lockTimeoutMs} ms; nothing was written, send the same request again`, {
    lock_timeout_ms: outcome.lockTimeoutMs,
  });
}
