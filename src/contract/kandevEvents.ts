import type { QueueEntryPayload } from './planCommentPayloads.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, TASK_PLAN_DELETED } from './subjects.js';

export { MESSAGE_QUEUE_STATUS_CHANGED, TASK_PLAN_DELETED };

/**
 * The Kandev events this service publishes when the clarification endpoints or the prompt
 * dispatcher change state. Each is sent as the standard envelope on `<prefix><type>`, where the
 * worker's own events stream captures it and reprojects the task like it would for any other
 * producer.
 */

export const MESSAGE_UPDATED = 'message.updated';
export const MESSAGE_ADDED = 'message.added';
export const TURN_STARTED = 'turn.started';
export const TASK_SESSION_STATE_CHANGED = 'task_session.state_changed';
export const TASK_UPDATED = 'task.updated';
export const TASK_DELETED = 'task.deleted';
export const CLARIFICATION_PRIMARY_ANSWERED = 'clarification.primary_answered';
export const CLARIFICATION_STALE_DISMISSED = 'clarification.stale_dismissed';

/** Kandev's message event fields (`newMessageEvent`), timestamps RFC 3339 with nanoseconds. */
export interface MessageEventData {
  message_id: string;
  session_id: string;
  task_id: string;
  turn_id: string;
  author_type: string;
  author_id: string;
  content: string;
  type: string;
  requests_input: boolean;
  metadata: Record<string, unknown>;
  created_at: string;
  updated_at: string;
}

/**
 * A live waiter confirmed the response of the bundle owned by `clarification_turn_id`. Kandev's
 * fields, plus `status`.
 */
export interface PrimaryAnsweredData {
  session_id: string;
  task_id: string;
  pending_id: string;
  clarification_turn_id: string;
  /** The bundle's question prompts, one per line. */
  question: string;
  /** What the agent is told when Kandev's watchdog resumes it instead; '' for a rejection. */
  answer_text: string;
  rejected: boolean;
  reject_reason: string;
  status: 'answered' | 'rejected';
}

/** A detached bundle was rejected: persisted, and no resume is sent to the agent. */
interface StaleDismissedData {
  pending_id: string;
  session_id: string;
  task_id: string;
  clarification_turn_id: string;
  reject_reason: string;
}

/** A turn opened (the prompt dispatcher publishes its reserved turn once the prompt was acknowledged). */
interface TurnStartedData {
  id: string;
  turn_id: string;
  session_id: string;
  task_id: string;
  started_at: string;
  created_at: string;
  updated_at: string;
  metadata: Record<string, unknown>;
}

/** A session moved from `old_state` to `new_state` (the dispatcher's RUNNING claim at its delivery marker). */
interface SessionStateChangedData {
  task_id: string;
  session_id: string;
  old_state: string;
  new_state: string;
}

/** Kandev's queue status: its web client replaces its queue panel with `entries` (`entries ?? []`). */
export interface QueueStatusChangedData {
  session_id: string;
  task_id: string;
  /** The waiting entries in queue order, each a queue.list entry plus its `metadata`. */
  entries: Array<QueueEntryPayload & { metadata: Record<string, unknown> }>;
  count: number;
  max: number;
  auto_run: boolean;
  merge_enabled: boolean;
}

/**
 * Kandev's `task_plan.deleted`: the deleted plan as it was, every column of `task_plans` (Kandev's
 * `TaskPlan`), timestamps RFC 3339. `comments_revision` is this service's column beside Kandev's.
 * Published through the output stream (plan-comment publisher), not the events stream.
 */
export interface TaskPlanDeletedData {
  id: string;
  task_id: string;
  title: string;
  content: string;
  created_by: string;
  created_at: string;
  updated_at: string;
  implementation_started_at: string | null;
  implementation_started_session_id: string | null;
  implementation_started_by: string | null;
  comments_revision: number;
}

export type KandevEvent = (
  | { type: typeof MESSAGE_UPDATED; data: MessageEventData }
  | { type: typeof MESSAGE_ADDED; data: MessageEventData }
  | { type: typeof TURN_STARTED; data: TurnStartedData }
  | { type: typeof TASK_SESSION_STATE_CHANGED; data: SessionStateChangedData }
  | { type: typeof MESSAGE_QUEUE_STATUS_CHANGED; data: QueueStatusChangedData }
  | { type: typeof CLARIFICATION_PRIMARY_ANSWERED; data: PrimaryAnsweredData }
  | { type: typeof CLARIFICATION_STALE_DISMISSED; data: StaleDismissedData }
) & {
  /**
   * The JetStream message id (`Nats-Msg-Id`) of an event whose repeat must be dropped within the
   * events stream's duplicate window (a retried step of the prompt dispatcher); none by default.
   */
  msgId?: string;
};
