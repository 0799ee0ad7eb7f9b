import type { BadRequest, Conflict, NotFound, Unavailable } from '../planComments/planCommentOutcomes.js';
import type { PlanCommentSnapshot } from '../planComments/planCommentRows.js';

/** What the accepting transaction (promptAcceptance.ts) takes and gives; the session states each delivery kind needs are turns/sessionStates.ts's. */

export type DeliveryKind = 'direct' | 'queued';

export interface PlanCommentRef {
  id: string;
  version: number;
}

export type PromptTarget =
  /** Send: exactly this session, primary or not. `taskId`, when given, must be the session's task. */
  | { kind: 'session'; sessionId: string; taskId?: string }
  /** Run: the task's primary session; `expectedSessionId` is the one the preflight resolved. */
  | { kind: 'primary'; taskId: string; expectedSessionId?: string };

export interface AcceptPromptInput {
  /** The caller's id for this prompt: the transcript message id and the receipt id, and the replay key. */
  callerId: string;
  target: PromptTarget;
  /** The text the user typed (may be empty when comments are carried). */
  content: string;
  planCommentRefs?: readonly PlanCommentRef[];
  attachmentIds?: readonly string[];
  /** Who staged the attachments; required with attachment ids. */
  attachmentOwnerId?: string;
  /** The session state the preflight saw: a change since then refuses the prompt (`session_unavailable`). */
  expectedSessionState?: string;
  model?: string;
  planMode?: boolean;
  authorId?: string;
  /** `direct` unless told: see the module comment. */
  deliveryKind?: DeliveryKind;
  /** Queued only: the most waiting queued prompts the session may hold (QUEUE_MAX_PER_SESSION). */
  queueMaxPerSession?: number;
}

export type PromptDelivery = 'pending' | 'acknowledged' | 'unconfirmed';

/**
 * Where an accepted prompt is now: `waiting` in its session's queue; `in_flight` (a direct prompt
 * not settled yet, or a queue entry a dispatcher reserved); `delivered` (settled: see `delivery`
 * for whether the agent acknowledged it); `removed` by a user; `cancelled` by the service (with a
 * reason). A replay answers with the current one.
 */
export type PromptStatus = 'waiting' | 'in_flight' | 'delivered' | 'removed' | 'cancelled';

export interface AcceptedPrompt {
  ok: true;
  /** True when this caller id was accepted before for the same request: nothing was written now. */
  replayed: boolean;
  taskId: string;
  sessionId: string;
  callerId: string;
  receiptId: string;
  /** The transcript message (id = caller id); null for a queued prompt not delivered yet. */
  messageId: string | null;
  turnId: string | null;
  promptSeq: number | null;
  deliveryKind: DeliveryKind;
  /** Queued: the entry's id (= caller id); null for a direct prompt. */
  queueId: string | null;
  /** Queued: the entry's position in its session's queue; null for a direct prompt, and once the entry is gone. */
  position: number | null;
  /** Queued and new: the session's waiting queued prompts after this one (for `message.queue.status_changed`). */
  queueCount: number | null;
  /** `pending` until the dispatcher settles the receipt; a replay reports the current value. */
  delivery: PromptDelivery;
  status: PromptStatus;
  /** Why a `cancelled` prompt was cancelled (`task_archived`, `session_completed`, ...); '' otherwise. */
  statusReason: string;
  /** The visible prompt as stored. */
  content: string;
  consumedCommentIds: string[];
  attachmentIds: string[];
  /** The task's collection after the acceptance (null where the database has no plan-comment tables). */
  snapshot: PlanCommentSnapshot | null;
}

export type AcceptPromptResult = AcceptedPrompt | NotFound | BadRequest | Conflict | Unavailable;
