import {
  MESSAGE_ADDED,
  MESSAGE_QUEUE_STATUS_CHANGED,
  MESSAGE_UPDATED,
  TASK_SESSION_STATE_CHANGED,
  TURN_STARTED,
  type KandevEvent,
} from '../../contract/kandevEvents.js';
import type { PromptDeliveryLabel } from '../../repository/prompts/promptReceiptStore.js';
import type { MessageRecord } from '../../repository/rowMapping.js';
import { messageEvents } from '../messageUpdatedEvents.js';
import { queueEntryPayload } from '../planCommentWire.js';
import type { QueueStatus } from '../../repository/prompts/queueStatus.js';

/**
 * The events of a prompt's delivery, each with a JetStream message id naming the step, so a step
 * repeated by a takeover or a retried publish within the events stream's duplicate window is
 * dropped instead of reprojecting twice.
 */

/** The transcript row, once it exists (written by the dispatcher's transcript step, or by the accepting transaction for a direct prompt). */
export function transcriptAdded(message: MessageRecord): KandevEvent[] {
  return messageEvents(MESSAGE_ADDED, [message], (m) => `message.added:${m.id}`);
}

/** The transcript's outcome label. */
export function transcriptLabelled(message: MessageRecord, label: PromptDeliveryLabel): KandevEvent[] {
  return messageEvents(MESSAGE_UPDATED, [message], (m) => `message.updated:${m.id}:prompt_delivery:${label}`);
}

/** The reserved turn, published only once the prompt was acknowledged (Kandev's PublishReservedTurn). */
export function reservedTurnStarted(message: MessageRecord, turn: { id: string; startedAt?: string; createdAt?: string }): KandevEvent {
  const at = turn.startedAt ?? message.createdAt;
  return {
    type: TURN_STARTED,
    msgId: `turn.started:${turn.id}`,
    data: {
      id: turn.id,
      turn_id: turn.id,
      session_id: message.sessionId,
      task_id: message.taskId,
      started_at: at,
      created_at: turn.createdAt ?? at,
      updated_at: message.updatedAt,
      metadata: {},
    },
  };
}

/** The RUNNING claim of the delivery marker. */
export function sessionClaimedRunning(receipt: { id: string; taskId: string; sessionId: string }, previousState: string): KandevEvent {
  return {
    type: TASK_SESSION_STATE_CHANGED,
    msgId: `task_session.state_changed:${receipt.sessionId}:prompt:${receipt.id}`,
    data: { task_id: receipt.taskId, session_id: receipt.sessionId, old_state: previousState, new_state: 'RUNNING' },
  };
}

/**
 * Kandev's `message.queue.status_changed` after a change of the session's queue (`step` names it):
 * the waiting entries in full, as Kandev's web client replaces its queue panel with `entries`, the
 * count, the limit, whether the queue runs by itself, and `merge_enabled` (this service does not
 * merge entries). The message id carries the count: the same step with the same count says nothing new.
 */
export function queueStatusChanged(session: { taskId: string; sessionId: string }, status: QueueStatus, max: number, step: string): KandevEvent {
  const count = status.entries.length;
  return {
    type: MESSAGE_QUEUE_STATUS_CHANGED,
    msgId: `message.queue.status_changed:${session.sessionId}:${step}:${count}`,
    data: {
      session_id: session.sessionId,
      task_id: session.taskId,
      entries: status.entries.map((entry) => ({ ...queueEntryPayload(entry), metadata: entry.metadata })),
      count,
      max,
      auto_run: status.autoRun,
      merge_enabled: false,
    },
  };
}
