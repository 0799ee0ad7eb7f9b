import { randomUUID } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import { topologyFor } from '../../src/contract/subjects.js';

/**
 * Queued prompt receipts written the way queue admission (`queue.enqueue`) leaves them: unreserved,
 * unattempted, no transcript yet, the next position of the session. Raw SQL on purpose: the tests
 * of the dispatcher do not depend on the admission endpoint.
 */
export async function insertQueuedReceipt(
  ctx: RepositoryContext,
  input: { sessionId: string; taskId: string; content?: string; id?: string; metadata?: Record<string, unknown> },
  table = 'queued_messages',
): Promise<string> {
  const id = input.id ?? `q-${randomUUID()}`;
  await rawRows(
    ctx,
    `INSERT INTO ${table} (id, session_id, task_id, position, content, model, plan_mode, attachments_json, metadata_json, queued_at, queued_by, delivery_kind, delivery_attempts, last_error)
     VALUES (?, ?, ?, (SELECT COALESCE(MAX(q.position), 0) + 1 FROM ${table} q WHERE q.session_id = ?), ?, '', 0, '[]', ?, ?, 'user', 'queued', 0, '') RETURNING id`,
    [
      id,
      input.sessionId,
      input.taskId,
      input.sessionId,
      input.content ?? `queued ${id}`,
      JSON.stringify({ client_queue_id: id, ...(input.metadata ?? {}) }),
      ctx.clock(),
    ],
  );
  return id;
}

export interface StoredPrompt {
  seq: number;
  receiptId: string | undefined;
  data: Record<string, unknown>;
}

/** Every message the prompt stream of `prefix` holds on the session's subject, oldest first. */
export async function promptsOnStream(nc: NatsConnection, prefix: string, sessionId: string): Promise<StoredPrompt[]> {
  const topology = topologyFor(prefix);
  const jsm = await jetstreamManager(nc);
  const subject = topology.agentPromptSubject(sessionId);
  // No catch: a missing stream is a failure of the test's setup, never "no prompts" (a zero-prompt check would pass vacuously).
  const info = await jsm.streams.info(topology.agentPromptStream, { subjects_filter: subject });
  if (info.state.messages === 0) return [];
  const out: StoredPrompt[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    // Only a sequence with no message (another subject's, removed by the stream's limits) is skipped; any other error fails.
    const m = await jsm.streams.getMessage(topology.agentPromptStream, { seq }).catch((err: unknown) => {
      if (/no message found/i.test(String((err as Error)?.message))) return null;
      throw err;
    });
    if (!m || m.subject !== subject) continue;
    out.push({ seq, receiptId: m.header?.get('Pending-Projector-Receipt-Id'), data: (m.json() as { data: Record<string, unknown> }).data });
  }
  return out;
}

/** How many messages the prompt stream holds on the session's subject. */
export async function countPromptsOnStream(nc: NatsConnection, prefix: string, sessionId: string): Promise<number> {
  return (await promptsOnStream(nc, prefix, sessionId)).length;
}
