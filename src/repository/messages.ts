import { randomUUID } from 'node:crypto';
import { storedNow, beginOrJoin, type RepositoryContext } from './context.js';
import { toMessageRecord, type MessageRecord } from './rowMapping.js';
import { lockSessionTurnWrites } from './sessionLocks.js';
import { SessionNotFoundError, createLifecycleTurn, getActiveTurn, startTurn } from './turns/turns.js';
import { toCanonicalTimestamp } from '../timestamps.js';

export interface CreateMessageInput {
  id?: string;
  sessionId: string;
  /** Attach to this turn; otherwise the open turn, or a new one (Kandev's getOrStartTurn). */
  turnId?: string;
  authorType?: 'user' | 'agent';
  authorId?: string;
  content?: string;
  type?: string;
  requestsInput?: boolean;
  metadata?: Record<string, unknown>;
  createdAt?: string;
  /**
   * Internal only: parent the message on a fresh lifecycle turn (the agent-boot message on resume).
   * No external input schema carries it; test/support/createMessageRequest.ts shows one strips it.
   */
  completedTurn?: boolean;
}

export function createMessage(ctx: RepositoryContext, input: CreateMessageInput): Promise<MessageRecord> {
  return beginOrJoin(ctx, async (tx) => {
    await lockSessionTurnWrites(tx, [input.sessionId]);
    const session = await tx.knex('task_sessions').select('task_id').where({ id: input.sessionId }).first();
    if (!session) throw new SessionNotFoundError(input.sessionId);
    let turnId = input.turnId;
    if (turnId === undefined) {
      if (input.completedTurn) turnId = (await createLifecycleTurn(tx, input.sessionId)).id;
      else turnId = ((await getActiveTurn(tx, input.sessionId)) ?? (await startTurn(tx, input.sessionId))).id;
    }
    const now = storedNow(tx);
    const row = {
      id: input.id ?? randomUUID(),
      task_session_id: input.sessionId,
      task_id: String(session.task_id),
      turn_id: turnId,
      author_type: input.authorType ?? 'agent',
      author_id: input.authorId ?? '',
      content: input.content ?? '',
      requests_input: input.requestsInput ? 1 : 0,
      type: input.type ?? 'message',
      metadata: JSON.stringify(input.metadata ?? {}),
      created_at: input.createdAt ? tx.dialect.storedTimestamp(toCanonicalTimestamp(input.createdAt)) : now,
      updated_at: now,
    };
    await tx.knex('task_session_messages').insert(row);
    return toMessageRecord(row);
  });
}
