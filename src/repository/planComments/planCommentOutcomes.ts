import { ERROR_CODES, PendingProjectorError } from '../../errors.js';
import type { PlanCommentSnapshot, PromptReceiptRecord } from './planCommentRows.js';

/**
 * The expected failures of the plan-comment store, as values (never thrown). `code` is the reply
 * code an endpoint answers with (src/contract/replyErrorCodes.ts); `reason` is the
 * machine-readable cause every one carries; the other members are the reply's details. Only a
 * failure of the database itself rejects.
 */

export type NotFoundReason = 'task_not_found' | 'plan_not_found' | 'session_not_found' | 'primary_session_not_found' | 'queue_entry_not_found';

export type BadRequestReason =
  /** The session addressed belongs to another task than the one named. */
  | 'session_not_in_task'
  | 'duplicate_refs'
  | 'duplicate_attachment_ids'
  /** Attachment ids without the owner that staged them. */
  | 'attachment_owner_required'
  /** No comment and no content: nothing to send. */
  | 'empty_prompt'
  /** The expansion is larger than PLAN_COMMENT_LIMITS.promptMaxBytes. */
  | 'prompt_too_large'
  /** A legacy draft whose `createdAt` is not a UTC timestamp: the whole import is refused. */
  | 'invalid_draft'
  /** `queue.update` of the text of an entry that keeps no readable copy of its consumed comments (another producer's row). */
  | 'entry_not_editable'
  /** Beside Kandev's tables, a new comment's id that is not a UUID (Kandev's comment service refuses it). */
  | 'invalid_comment_id';

export type NotFound = { ok: false; code: 'not_found'; reason: NotFoundReason; message: string };
export type BadRequest = { ok: false; code: 'bad_request'; reason: BadRequestReason; message: string };

/** Every conflict, each with its reason and what a client needs to recover. */
export type Conflict =
  /** A referenced comment is gone or at another version, or an edit's version is stale: the current collection. */
  | { ok: false; code: 'conflict'; reason: 'plan_comments_changed'; message: string; snapshot: PlanCommentSnapshot }
  /** Run: the task's primary is not the session the preflight resolved (null: it has none now). */
  | { ok: false; code: 'conflict'; reason: 'primary_session_changed'; message: string; primarySessionId: string | null }
  /**
   * A direct prompt: the target session is not promptable (IDLE or WAITING_FOR_INPUT), or changed
   * state since the preflight. A queued one: the session is not active (terminal, or a state unknown here).
   */
  | { ok: false; code: 'conflict'; reason: 'session_unavailable'; message: string; state: string }
  /** The task is archived. */
  | { ok: false; code: 'conflict'; reason: 'task_inactive'; message: string }
  /** The caller id was accepted before for another request. */
  | { ok: false; code: 'conflict'; reason: 'caller_id_conflict'; message: string }
  /** Attachments that are unknown, of another owner or workspace, expired, or not staged. */
  | { ok: false; code: 'conflict'; reason: 'attachments_unavailable'; message: string; attachmentIds: string[] }
  /** A create replayed with another body, text, anchor, task or plan under the same comment id. */
  | { ok: false; code: 'conflict'; reason: 'comment_id_conflict'; message: string }
  /** An attachment id staged with other metadata, or a storage key another attachment holds. */
  | { ok: false; code: 'conflict'; reason: 'attachment_id_conflict'; message: string }
  /** `queue.enqueue`: the session already has `max` waiting queued prompts (QUEUE_MAX_PER_SESSION). */
  | { ok: false; code: 'conflict'; reason: 'queue_full'; message: string; count: number; max: number }
  /** A queued prompt or an edit that would take the session's waiting prompts past PLAN_COMMENT_LIMITS.queueTextMaxBytes of text. */
  | { ok: false; code: 'conflict'; reason: 'queue_text_full'; message: string; contentBytes: number; maxBytes: number }
  /** A queue entry named is reserved or attempted by a dispatcher: it is being delivered and can no longer change. */
  | { ok: false; code: 'conflict'; reason: 'entry_in_flight'; message: string; queueIds: string[] }
  /** A queue change drawn from a stale view (an entry's version, the queue's revision, the waiting set): the queue as it is now. */
  | { ok: false; code: 'conflict'; reason: 'queue_changed'; message: string; revision: number; entries: PromptReceiptRecord[] }
  /**
   * `plan.delete` beside Kandev's tables: the plan is Kandev's, and only Kandev's plan service deletes
   * it (keeping its revisions and publishing `task_plan.deleted`). Nothing was read or written.
   */
  | { ok: false; code: 'conflict'; reason: 'plan_owned_by_kandev'; message: string }
  /**
   * The change would take the collection past PLAN_COMMENT_LIMITS.commentsPerPlan comments (`limit`)
   * or past its planTextMaxBytes of text (the message says which).
   */
  | { ok: false; code: 'conflict'; reason: 'plan_comments_full'; message: string; limit: number; snapshot: PlanCommentSnapshot };

export type ConflictReason = Conflict['reason'];

/** The database lacks a table (or column) the feature needs: Kandev's older schema. Nothing was read or written. */
export type Unavailable = { ok: false; code: 'unavailable'; reason: 'tables_missing'; message: string; missing: string[] };

export type StoreFailure = NotFound | BadRequest | Conflict | Unavailable;

export const notFound = (reason: NotFoundReason, message: string): NotFound => ({ ok: false, code: 'not_found', reason, message });
export const badRequest = (reason: BadRequestReason, message: string): BadRequest => ({ ok: false, code: 'bad_request', reason, message });

export function unavailable(feature: string, missing: readonly string[]): Unavailable {
  return {
    ok: false,
    code: 'unavailable',
    reason: 'tables_missing',
    message: `${feature} needs ${missing.join(', ')}, which this database lacks (a Kandev schema older than task-owned plan comments)`,
    missing: [...missing],
  };
}

/** A conflict of `reason` with its details. */
export function conflict<R extends ConflictReason>(
  reason: R,
  message: string,
  details: Omit<Extract<Conflict, { reason: R }>, 'ok' | 'code' | 'reason' | 'message'>,
): Conflict {
  return { ok: false, code: 'conflict', reason, message, ...details } as Conflict;
}

/** The refusal of `plan.delete` beside Kandev's tables, naming what deletes a plan there. */
export function planOwnedByKandev(taskId: string, planId: string): Extract<Conflict, { reason: 'plan_owned_by_kandev' }> {
  return {
    ok: false,
    code: 'conflict',
    reason: 'plan_owned_by_kandev',
    message:
      `plan ${planId} of task ${taskId} is Kandev's: beside Kandev's tables this service deletes no plan. ` +
      "Delete it through Kandev's plan service, which deletes the plan row, keeps its revisions and publishes task_plan.deleted",
  };
}

export type PlanCommentsFull = Extract<Conflict, { reason: 'plan_comments_full' }>;

export type CommentsChanged = Extract<Conflict, { reason: 'plan_comments_changed' }>;

export function commentsChanged(snapshot: PlanCommentSnapshot, message = 'the referenced plan comments changed'): CommentsChanged {
  return { ok: false, code: 'conflict', reason: 'plan_comments_changed', message, snapshot };
}

/**
 * Rows that break an invariant the store's own locks guarantee (a locked plan gone, a consumed row
 * count that differs from the one just read under lock). Thrown, so the transaction rolls back.
 */
export class PlanCommentIntegrityError extends PendingProjectorError {
  override name = 'PlanCommentIntegrityError';
  constructor(message: string) {
    super(ERROR_CODES.PLAN_COMMENT_INTEGRITY, message);
  }
}
