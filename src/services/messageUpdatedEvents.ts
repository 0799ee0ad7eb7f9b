import { MESSAGE_UPDATED, type KandevEvent } from '../events/kandevEvents.js';
import type { MessageRecord } from '../repository/rowMapping.js';

/** One `message.updated` per changed row, with Kandev's message event fields. */
export function messageUpdatedEvents(rows: readonly MessageRecord[]): KandevEvent[] {
  return rows.map((row) => ({
    type: MESSAGE_UPDATED,
    data: {
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
    },
  }));
}
