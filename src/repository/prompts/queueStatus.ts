import type { RepositoryContext } from '../context.js';
import type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';
import { listWaitingQueuedPrompts } from './queuedPrompts.js';
import { readAutoRun } from './queueAutoRun.js';
import { CONSUMED_COMMENTS_KEY, TYPED_CONTENT_KEY } from './consumedComments.js';

/**
 * A session's queue as `message.queue.status_changed` tells it: the waiting entries in order, and
 * whether it runs by itself. The entries' metadata leaves out this service's copies of what each
 * consumed (its comments, its typed text): the event goes to every subscriber and stays small.
 */
export interface QueueStatus {
  entries: PromptReceiptRecord[];
  autoRun: boolean;
}

/** The session's queue now; a session with no receipt table or no entries is an empty, running queue. */
export async function readQueueStatus(ctx: RepositoryContext, table: ReceiptTable | null, queueState: boolean, sessionId: string): Promise<QueueStatus> {
  if (!table) return { entries: [], autoRun: true };
  const entries = await listWaitingQueuedPrompts(ctx, table, sessionId);
  return { entries: entries.map((e) => ({ ...e, metadata: publicMetadata(e.metadata) })), autoRun: await readAutoRun(ctx, queueState, sessionId) };
}

function publicMetadata(metadata: Record<string, unknown>): Record<string, unknown> {
  const { [CONSUMED_COMMENTS_KEY]: _comments, [TYPED_CONTENT_KEY]: _typed, ...rest } = metadata;
  return rest;
}
