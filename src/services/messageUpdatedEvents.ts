import { MESSAGE_ADDED, MESSAGE_UPDATED, type KandevEvent, type MessageEventData } from '../contract/kandevEvents.js';
import type { MessageRecord } from '../repository/rowMapping.js';

function messageEventData(row: MessageRecord): MessageEventData {
  return {
    message_id: row.id,
    session_id: row.sessionId,
    task_id: row.taskId,
    turn_id: row.turnId,
    author_type: row.authorType,
    author_id: row.authorId,
    content: row.content,
    type: row.type,
    requests_input: row.requestsInput,
    metadata: row.metadata,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/**
 * One `message.added` or `message.updated` per row, with Kandev's message event fields. `msgId`,
 * when given, names each event's JetStream message id (a repeat of the same step is dropped).
 */
export function messageEvents(
  type: typeof MESSAGE_ADDED | typeof MESSAGE_UPDATED,
  rows: readonly MessageRecord[],
  msgId?: (row: MessageRecord) => string,
): KandevEvent[] {
  return rows.map((row) => ({ type, data: messageEventData(row), ...(msgId ? { msgId: msgId(row) } : {}) }));
}

/** One `message.updated` per changed row, with Kandev's message event fields. */
export function messageUpdatedEvents(rows: readonly MessageRecord[]): KandevEvent[] {
  return messageEvents(MESSAGE_UPDATED, rows);
}
