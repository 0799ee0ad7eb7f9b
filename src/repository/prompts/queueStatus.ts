import type { RepositoryContext } from '../context.js';
import type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
import type { ReceiptTable } from '../schema/planCommentTables.js';
import { listWaitingQueuedPrompts } from './queuedPrompts.js';
import { readAutoRun } from './queueAutoRun.js';

/** A session's queue as `message.queue.status_changed` tells it: the waiting entries in order, and whether it runs by itself. */
export interface QueueStatus {
  entries: PromptReceiptRecord[];
  autoRun: boolean;
}

/** The session's queue now; a session with no receipt table or no entries is an empty, running queue. */
export async function readQueueStatus(ctx: RepositoryContext, table: ReceiptTable | null, queueState: boolean, sessionId: string): Promise<QueueStatus> {
  if (!table) return { entries: [], autoRun: true };
  return { entries: await listWaitingQueuedPrompts(ctx, table, sessionId), autoRun: await readAutoRun(ctx, queueState, sessionId) };
}
