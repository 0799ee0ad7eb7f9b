import { beginOrNest, type RepositoryContext } from '../context.js';
import { notFound, unavailable, type NotFound, type Unavailable } from '../planComments/planCommentOutcomes.js';
import type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
import { detectPlanCommentSchema, type PlanCommentSchema } from '../schema/planCommentTables.js';
import { acceptPrompt, type AcceptPromptInput, type AcceptPromptResult } from './promptAcceptance.js';
import { countWaitingQueuedPrompts, listWaitingQueuedPrompts } from './queuedPrompts.js';
import { readAutoRun, writeAutoRun } from './queueAutoRun.js';
import { lockSessionQueue } from './sessionQueue.js';
import { cancelFinishedQueue, listFinishedQueues, type CancelFinishedResult, type FinishedQueue, type FinishedScope } from './finishedQueues.js';
import { withdrawQueueEntries, type WithdrawInput, type WithdrawResult } from './queueWithdrawal.js';
import { readQueueRevision } from './queueRevision.js';
import { readQueueStatus, type QueueStatus } from './queueStatus.js';
import {
  reorderQueue,
  updateQueueEntry,
  type ReorderQueueInput,
  type ReorderQueueResult,
  type UpdateQueueEntryInput,
  type UpdateQueueEntryResult,
} from './queueEdits.js';

export type { AcceptedPrompt, AcceptPromptInput, AcceptPromptResult, PlanCommentRef, PromptTarget } from './promptAcceptance.js';
export type { PromptReceiptRecord } from '../planComments/planCommentRows.js';
export type { WithdrawInput } from './queueWithdrawal.js';
export type { FinishedQueue, FinishedScope } from './finishedQueues.js';

/** A session's waiting queued prompts (queuedPrompts.ts), in queue order, at the queue's revision. */
type QueueListResult = { ok: true; taskId: string; entries: PromptReceiptRecord[]; revision: number; autoRun: boolean } | NotFound | Unavailable;

/** `changed`: false when the session already was so (nothing to tell anyone). */
type SetAutoRunResult = { ok: true; taskId: string; autoRun: boolean; changed: boolean; count: number } | NotFound | Unavailable;

/**
 * The prompt services' port: accepting a prompt (`message.send`, `plan_comment.run`,
 * `queue.enqueue`) and reading a session's queue. Every expected outcome is a value carrying a
 * `code` and a `reason`; only a failure of the database rejects.
 *
 * Created on a context that already is a transaction (the task admission's mutation scope),
 * `acceptPrompt` runs inside it and keeps its all-or-nothing rule with a savepoint. The store takes
 * no admission lock itself: the lease is the caller's, and always outermost.
 */
export interface PromptStore {
  /** What this database offers; a prompt needing a missing table answers `unavailable`, naming it. */
  readonly schema: PlanCommentSchema;
  /** The accepting transaction (promptAcceptance.ts), for both delivery kinds. */
  acceptPrompt(input: AcceptPromptInput): Promise<AcceptPromptResult>;
  /** The session's waiting queued prompts; an unknown session is `session_not_found`. */
  listQueue(sessionId: string): Promise<QueueListResult>;
  /** Removes or cancels waiting entries of a session, all or nothing (queueWithdrawal.ts). */
  withdraw(input: WithdrawInput): Promise<WithdrawResult>;
  /** Edits one waiting entry at the version its author saw (queueEdits.ts). */
  updateQueueEntry(input: UpdateQueueEntryInput): Promise<UpdateQueueEntryResult>;
  /** Rewrites the waiting order at the revision its author saw (queueEdits.ts). */
  reorderQueue(input: ReorderQueueInput): Promise<ReorderQueueResult>;
  /** Pauses or resumes the session's automatic queue delivery, durably (queueAutoRun.ts). */
  setAutoRun(sessionId: string, autoRun: boolean): Promise<SetAutoRunResult>;
  /** Queues of the scope whose waiting entries can never be delivered (finishedQueues.ts); none without a receipt table. */
  listFinishedQueues(scope: FinishedScope): Promise<FinishedQueue[]>;
  /** The session's queue as `message.queue.status_changed` tells it (queueStatus.ts); a session that is gone has an empty one. */
  queueStatus(sessionId: string): Promise<QueueStatus>;
  /** Cancels a finished queue's waiting entries if it still is finished (finishedQueues.ts). */
  cancelFinishedQueue(taskId: string, sessionId: string): Promise<CancelFinishedResult>;
}

/** The store over `ctx`, for a database whose tables `schema` describes (`detectPlanCommentSchema`). */
export function createPromptStore(ctx: RepositoryContext, schema: PlanCommentSchema): PromptStore {
  return {
    schema,
    acceptPrompt: (input) => acceptPrompt(ctx, schema, input),
    async listQueue(sessionId) {
      if (!schema.receiptTable) return unavailable('the prompt queue', schema.missingForPrompts);
      const session = await ctx.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
      if (!session) return notFound('session_not_found', `session ${sessionId} does not exist`);
      const table = schema.receiptTable;
      // The revision first: entries read after it are at least as new, and any change between the
      // two reads moved the revision past the one returned, so a reorder drawn from them is refused.
      const revision = await readQueueRevision(ctx, sessionId);
      const entries = await listWaitingQueuedPrompts(ctx, table, sessionId);
      return { ok: true, taskId: String(session.task_id), entries, revision, autoRun: await readAutoRun(ctx, schema.queueState, sessionId) };
    },
    withdraw: (input) => withdrawQueueEntries(ctx, schema, input),
    listFinishedQueues: (scope) => (schema.receiptTable ? listFinishedQueues(ctx, schema.receiptTable, scope) : Promise.resolve([])),
    cancelFinishedQueue: (taskId, sessionId) => cancelFinishedQueue(ctx, schema, taskId, sessionId),
    queueStatus: (sessionId) => readQueueStatus(ctx, schema.receiptTable, schema.queueState, sessionId),
    updateQueueEntry: (input) => updateQueueEntry(ctx, schema, input),
    reorderQueue: (input) => reorderQueue(ctx, schema, input),
    async setAutoRun(sessionId, autoRun) {
      const table = schema.receiptTable;
      if (!table || !schema.queueState) return unavailable('pausing a queue', schema.queueState ? schema.missingForPrompts : ['queue_session_state']);
      return beginOrNest(ctx, async (tx): Promise<SetAutoRunResult> => {
        const taskId = await lockSessionQueue(tx, sessionId);
        if (taskId === undefined) return notFound('session_not_found', `session ${sessionId} does not exist`);
        const changed = await writeAutoRun(tx, sessionId, autoRun);
        return { ok: true, taskId, autoRun, changed, count: await countWaitingQueuedPrompts(tx, table, sessionId) };
      });
    },
  };
}

/** Reads the catalog, then builds the store: for callers that build it once per database. */
export async function openPromptStore(ctx: RepositoryContext): Promise<PromptStore> {
  return createPromptStore(ctx, await detectPlanCommentSchema(ctx));
}
