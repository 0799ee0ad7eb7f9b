import { MESSAGE_QUEUE_STATUS_CHANGED } from './subjects.js';

/**
 * The Kandev events this service publishes when the clarification endpoints change state. Each is
 * sent as the standard envelope on `<prefix><type>`, where the worker's own events stream captures
 * it and reprojects the task like it would for any other producer.
 */

export const MESSAGE_UPDATED = 'message.updated';
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

/** A live waiter confirmed the response of the bundle owned by `clarification_turn_id`. */
export interface PrimaryAnsweredData {
  pending_id: string;
  session_id: string;
  task_id: string;
  clarification_turn_id: string;
  status: 'answered' | 'rejected';
}

/** A detached bundle was rejected: persisted, and no resume is sent to the agent. */
export interface StaleDismissedData {
  pending_id: string;
  session_id: string;
  task_id: string;
  clarification_turn_id: string;
  reject_reason: string;
}

/** Kandev's queue event: the session's waiting queued prompts (`count`) and its limit (`max`). */
export interface QueueStatusChangedData {
  session_id: string;
  task_id: string;
  count: number;
  max: number;
}

/**
 * One event to publish. `msgId`, when given, is its JetStream `Nats-Msg-Id`, so the events stream
 * drops a repeat of that very event within its duplicate window.
 */
export type KandevEvent = (
  | { type: typeof MESSAGE_UPDATED; data: MessageEventData }
  | { type: typeof CLARIFICATION_PRIMARY_ANSWERED; data: PrimaryAnsweredData }
  | { type: typeof CLARIFICATION_STALE_DISMISSED; data: StaleDismissedData }
  | { type: typeof MESSAGE_QUEUE_STATUS_CHANGED; data: QueueStatusChangedData }
) & { msgId?: string };
