import type { RepositoryContext } from '../context.js';
import { parseMetadata, str } from '../rowMapping.js';
import { readStoredTimestamp, type CanonicalTimestamp } from '../../timestamps.js';

/**
 * Records of the plan-comment, attachment and prompt-receipt tables (migration 0004; Kandev's names),
 * and the one place their timestamps are written, compared and read back.
 *
 * Vocabulary (ADR 0002):
 * - plan: a task's one `task_plans` row; its comments are the task's **collection**;
 * - revision: `task_plans.comments_revision`, bumped by every committed change of the collection;
 * - snapshot: the whole collection at one revision, comments in (created_at, id) order;
 * - admission: a ledger row in `task_plan_comment_admissions` for every comment id ever admitted, so
 *   a replayed create never brings back a comment that was consumed or deleted;
 * - consumption: the deletion of exactly the referenced comments, at their versions, inside the
 *   transaction that accepts the prompt carrying them;
 * - receipt: the durable record of an accepted prompt until it is delivered (`queued_messages` in
 *   owned mode, `pending_projector_prompt_receipts` beside Kandev's tables); its id is the caller id.
 */

export interface TaskPlanRecord {
  id: string;
  taskId: string;
  title: string;
  content: string;
  createdBy: string;
  createdAt: string;
  updatedAt: string;
  /** Kandev's implementation-start fields: null until an implementation started from the plan. */
  implementationStartedAt: string | null;
  implementationStartedSessionId: string | null;
  implementationStartedBy: string | null;
  commentsRevision: number;
}

export interface PlanCommentRecord {
  id: string;
  taskId: string;
  planId: string;
  body: string;
  selectedText: string;
  anchorFrom: number | null;
  anchorTo: number | null;
  version: number;
  createdAt: string;
  updatedAt: string;
}

/** The whole collection at one revision. `planId` is null (and revision 0) for a task without a plan. */
export interface PlanCommentSnapshot {
  taskId: string;
  planId: string | null;
  revision: number;
  comments: PlanCommentRecord[];
}

type AttachmentState = 'staged' | 'claimed' | 'expired' | 'deleted';

export interface AttachmentRecord {
  id: string;
  ownerId: string;
  workspaceId: string;
  taskId: string;
  sessionId: string;
  messageId: string;
  queueId: string;
  name: string;
  mimeType: string;
  kind: string;
  deliveryMode: string;
  sizeBytes: number;
  storageKey: string;
  /** As stored: another producer may have written a state outside the four. */
  state: string;
  expiresAt: string;
  createdAt: string;
  updatedAt: string;
}

export interface PromptReceiptRecord {
  id: string;
  sessionId: string;
  taskId: string;
  position: number;
  content: string;
  model: string;
  planMode: boolean;
  /** `attachments_json`, parsed; [] when it is not a JSON array. */
  attachments: unknown[];
  metadata: Record<string, unknown>;
  metadataValid: boolean;
  queuedAt: string;
  queuedBy: string;
  deliveryKind: string;
  reservationToken: string | null;
  reservationOwner: string | null;
  reservationExpiresAt: string | null;
  deliveryAttemptedAt: string | null;
  deliveryAttempts: number;
  nextAttemptAt: string | null;
  lastError: string;
  transcriptMessageId: string | null;
  transcriptTurnId: string | null;
  /** The entry's edit counter (`queue.update` compares it); 1 for a row written before it existed. */
  version: number;
}

type Row = Record<string, unknown>;
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const intOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/**
 * A timestamp read back from one of these tables. The canonical text today; where Kandev's backend
 * writes another form into the same tables, this is the one read to convert.
 */
function readInstant(v: unknown): string {
  return readStoredTimestamp(str(v));
}

function readInstantOrNull(v: unknown): string | null {
  return v === null || v === undefined ? null : readInstant(v);
}

/**
 * The instant written now into a Kandev-named table by the plan-comment code: `task_plans`,
 * `task_plan_comments`, `task_plan_comment_admissions`, `task_message_attachments` and the prompt's
 * `task_session_messages` row. Every such write goes through this or `writtenInstant`, so a
 * per-database stored form (Kandev's SQLite text) changes them all in one place. The receipt
 * tables are not among them: owned mode's `queued_messages` and this service's own table always
 * hold canonical text (`ctx.clock()`).
 */
export function writtenNow(ctx: RepositoryContext): string {
  return writtenInstant(ctx, ctx.clock());
}

/** A given canonical instant (a legacy draft's creation, an expiry), as written into those tables. */
export function writtenInstant(ctx: RepositoryContext, value: CanonicalTimestamp): string {
  return ctx.dialect.storedTimestamp(value);
}

/**
 * A timestamp column of those tables as an ORDER BY key or a comparison operand against a bound
 * canonical instant: the dialect's timestamp key (the column itself unless the database can hold
 * Kandev's SQLite text beside ours).
 */
export function instantColumn(ctx: RepositoryContext, column: string): string {
  return ctx.dialect.timestampKey(column);
}

export function toTaskPlanRecord(row: Row): TaskPlanRecord {
  return {
    id: str(row.id),
    taskId: str(row.task_id),
    title: str(row.title),
    content: str(row.content),
    createdBy: str(row.created_by),
    createdAt: readInstant(row.created_at),
    updatedAt: readInstant(row.updated_at),
    implementationStartedAt: readInstantOrNull(row.implementation_started_at),
    implementationStartedSessionId: strOrNull(row.implementation_started_session_id),
    implementationStartedBy: strOrNull(row.implementation_started_by),
    commentsRevision: Number(row.comments_revision ?? 0),
  };
}

export function toPlanCommentRecord(row: Row): PlanCommentRecord {
  return {
    id: str(row.id),
    taskId: str(row.task_id),
    planId: str(row.plan_id),
    body: str(row.body),
    selectedText: str(row.selected_text),
    anchorFrom: intOrNull(row.anchor_from),
    anchorTo: intOrNull(row.anchor_to),
    version: Number(row.version),
    createdAt: readInstant(row.created_at),
    updatedAt: readInstant(row.updated_at),
  };
}

export function toAttachmentRecord(row: Row): AttachmentRecord {
  return {
    id: str(row.id),
    ownerId: str(row.owner_id),
    workspaceId: str(row.workspace_id),
    taskId: str(row.task_id),
    sessionId: str(row.session_id),
    messageId: str(row.message_id),
    queueId: str(row.queue_id),
    name: str(row.name),
    mimeType: str(row.mime_type),
    kind: str(row.kind),
    deliveryMode: str(row.delivery_mode),
    sizeBytes: Number(row.size_bytes),
    storageKey: str(row.storage_key),
    state: str(row.state),
    expiresAt: readInstant(row.expires_at),
    createdAt: readInstant(row.created_at),
    updatedAt: readInstant(row.updated_at),
  };
}

function parseJsonArray(raw: unknown): unknown[] {
  if (typeof raw !== 'string') return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    // Another producer's malformed text reads as "no attachments", never as an error.
    return [];
  }
}

export function toPromptReceiptRecord(row: Row): PromptReceiptRecord {
  const { metadata, valid } = parseMetadata(row.metadata_json);
  return {
    id: str(row.id),
    sessionId: str(row.session_id),
    taskId: str(row.task_id),
    position: Number(row.position),
    content: str(row.content),
    model: str(row.model),
    planMode: Number(row.plan_mode) === 1,
    attachments: parseJsonArray(row.attachments_json),
    metadata,
    metadataValid: valid,
    queuedAt: readInstant(row.queued_at),
    queuedBy: str(row.queued_by),
    deliveryKind: str(row.delivery_kind),
    reservationToken: strOrNull(row.delivery_reservation_token),
    reservationOwner: strOrNull(row.delivery_reservation_owner),
    reservationExpiresAt: readInstantOrNull(row.delivery_reservation_expires_at),
    deliveryAttemptedAt: readInstantOrNull(row.delivery_attempted_at),
    deliveryAttempts: Number(row.delivery_attempts ?? 0),
    nextAttemptAt: readInstantOrNull(row.next_attempt_at),
    lastError: str(row.last_error),
    transcriptMessageId: strOrNull(row.durable_transcript_message_id),
    transcriptTurnId: strOrNull(row.durable_transcript_turn_id),
    version: Number(row.version ?? 1),
  };
}
