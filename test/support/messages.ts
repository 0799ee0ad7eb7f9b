import { storedNow, type RepositoryContext } from '../../src/repository/context.js';
import { toMessageRecord, type MessageRecord } from '../../src/repository/rowMapping.js';

// Reads and writes of message rows that only the tests make: the service writes messages through
// createMessage (src/repository/messages.ts) and reads them in its own queries.

export async function getMessage(ctx: RepositoryContext, messageId: string): Promise<MessageRecord | undefined> {
  const row = await ctx.knex('task_session_messages').where({ id: messageId }).first();
  return row ? toMessageRecord(row) : undefined;
}

export async function getMessages(ctx: RepositoryContext, messageIds: readonly string[]): Promise<MessageRecord[]> {
  if (messageIds.length === 0) return [];
  const rows = await ctx
    .knex('task_session_messages')
    .whereIn('id', [...messageIds])
    .orderByRaw(`${ctx.dialect.timestampKey('created_at')}, id`);
  return rows.map(toMessageRecord);
}

/** Deletes a message; the turn record stays, so current-turn ownership never moves backward. */
export async function deleteMessage(ctx: RepositoryContext, messageId: string): Promise<boolean> {
  return (await ctx.knex('task_session_messages').where({ id: messageId }).del()) > 0;
}

/** Writes raw metadata text (tests and repairs of rows written by other producers). */
export async function setMessageMetadataText(ctx: RepositoryContext, messageId: string, metadata: string | null): Promise<boolean> {
  return (
    (await ctx
      .knex('task_session_messages')
      .where({ id: messageId })
      .update({ metadata, updated_at: storedNow(ctx) })) > 0
  );
}
