import type { AttachmentRecord } from '../repository/attachments/attachmentStore.js';
import type { PlanCommentRecord, PlanCommentSnapshot, StoreFailure } from '../repository/planComments/planCommentStore.js';
import type { TaskPlanRecord } from '../repository/planComments/planCommentRows.js';
import type { TaskPlanDeletedData } from '../contract/kandevEvents.js';
import type { AcceptedPrompt, PromptReceiptRecord } from '../repository/prompts/promptStore.js';
import type {
  AdmissionPayload,
  AttachmentPayload,
  PlanCommentPayload,
  PlanCommentsPayload,
  QueueEntryPayload,
  ReasonedFailure,
} from '../contract/planCommentPayloads.js';
import type { ReplyFailure } from '../contract/replyErrorCodes.js';

/** The plan-comment stores' records as their wire shapes (src/contract/planCommentPayloads.ts). */

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

/** A plan row as Kandev's plan events carry it (`task_plan.deleted`). */
export function taskPlanPayload(p: TaskPlanRecord): TaskPlanDeletedData {
  return {
    id: p.id,
    task_id: p.taskId,
    title: p.title,
    content: p.content,
    created_by: p.createdBy,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
    implementation_started_at: p.implementationStartedAt,
    implementation_started_session_id: p.implementationStartedSessionId,
    implementation_started_by: p.implementationStartedBy,
    comments_revision: p.commentsRevision,
  };
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
    status: accepted.status,
    status_reason: accepted.statusReason,
    plan_comments: accepted.snapshot ? snapshotPayload(accepted.snapshot) : null,
  };
}

export function queueEntryPayload(r: PromptReceiptRecord): QueueEntryPayload {
  return {
    id: r.id,
    session_id: r.sessionId,
    task_id: r.taskId,
    position: r.position,
    version: r.version,
    content: r.content,
    model: r.model,
    plan_mode: r.planMode,
    queued_at: r.queuedAt,
    queued_by: r.queuedBy,
    attachments: r.attachments,
  };
}

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A store outcome as a reply: `code` and `message` into `error`, `reason` and details beside it. */
export function storeFailure(outcome: StoreFailure): ReasonedFailure {
  const { ok: _ok, code, message, reason, ...details } = outcome as StoreFailure & Record<string, unknown>;
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(details)) {
    if (key === 'snapshot') extra.plan_comments = snapshotPayload(value as PlanCommentSnapshot);
    else if (key === 'entries') extra.entries = (value as PromptReceiptRecord[]).map(queueEntryPayload);
    else extra[snake(key)] = value;
  }
  return { ok: false, error: { code, message }, reason, ...extra };
}

export function reasoned(code: ReplyFailure['error']['code'], reason: string, message: string, details: Record<string, unknown> = {}): ReasonedFailure {
  return { ok: false, error: { code, message }, reason, ...details };
}

/** The admission lease (or mutation lock) of the task stayed held past its budget: nothing ran. */
export function lockTimeoutFailure(outcome: { lockTimeoutMs: number }, taskId: string): ReasonedFailure {
  return reasoned(
    'unavailable',
    'lock_timeout',
    `the admission lease of task ${taskId} stayed held for ${outcome.lockTimeoutMs} ms; nothing was written, send the same request again`,
    {
      lock_timeout_ms: outcome.lockTimeoutMs,
    },
  );
}
