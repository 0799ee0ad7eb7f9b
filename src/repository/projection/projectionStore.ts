import { beginOrJoin, type RepositoryContext } from '../context.js';
import { loadTaskPendingStates, type TaskPendingState } from './pendingActions.js';
import {
  compareAndSetStatusSummaries,
  listStatusSummariesAfter,
  loadStatusSummaries,
  overwriteLockedStatusSummaries,
  readStatusSummariesForUpdate,
  restoreStatusSummaries,
  type StoredStatusSummary,
} from './statusSummaries.js';
import { readSummaryWrites, recordForeignSummaryWrites, recordSummaryWrites, type ForeignSummaryWrite, type SummaryWriteRecord } from './summaryWrites.js';
import { listTaskIdsAfter, taskIdOfSession } from '../tasks/tasks.js';
import { detectQueuedPromptTables, type QueuedPromptTables } from '../schema/queueTables.js';

export type { StoredStatusSummary, SummaryWriteRecord, TaskPendingState };

/** What the database lets the projection scheduler do (from the dialect's capabilities). */
interface ProjectionCapabilities {
  /** Only one transaction writes at a time (SQLite): more than one projection transaction would only queue. */
  readonly singleWriter: boolean;
  /** A batch may give up its transaction slot once only COMMIT is left (PostgreSQL). */
  readonly releasesSlotBeforeCommit: boolean;
}

/** The statements of one projection transaction; the summary rows read here stay locked until it ends. */
export interface ProjectionTransaction {
  /** Stored summaries of the tasks, row-locked in task id order where the dialect can (readStatusSummariesForUpdate). */
  readSummariesForUpdate(taskIds: readonly string[]): Promise<Map<string, StoredStatusSummary>>;
  /** What this service last wrote into the tasks' summary rows (summaryWrites.ts); a task it never wrote is absent. */
  readSummaryWrites(taskIds: readonly string[]): Promise<Map<string, SummaryWriteRecord>>;
  /** Records the revisions this transaction wrote and will commit, with the owned fields written. */
  recordSummaryWrites(writes: ReadonlyArray<{ taskId: string; revision: number; ownedFields: string }>): Promise<void>;
  /** Records summary rows found written by another writer, for `doctor`. */
  recordForeignSummaryWrites(found: readonly ForeignSummaryWrite[]): Promise<void>;
  /** The authoritative pending state of the tasks, queued prompt counts included; unknown task ids are absent. */
  loadPendingStates(taskIds: readonly string[]): Promise<Map<string, TaskPendingState>>;
  /** Kandev's compare-and-set of every row in one go; resolves to the task ids whose row was written. */
  compareAndSet(rows: readonly StoredStatusSummary[]): Promise<Set<string>>;
  /** Writes rows this transaction locked and compare-and-set, as given (a revision bump). */
  overwriteLocked(rows: readonly StoredStatusSummary[]): Promise<void>;
  /** Puts rows back as they were read (`previous` undefined: the row did not exist). */
  restore(restores: ReadonlyArray<{ taskId: string; previous: StoredStatusSummary | undefined }>): Promise<void>;
  /** The store's clock: the `updated_at` a summary written now carries. */
  now(): string;
}

/**
 * The port src/projectors/ depends on: projection transactions, the reads reconcile and the bucket
 * refill walk, and the database's capabilities. `createProjectionStore` implements it over the
 * repository functions; the projectors import only its type.
 */
export interface ProjectionStore {
  readonly capabilities: ProjectionCapabilities;
  /** Runs `fn` in one transaction: COMMIT when it resolves, ROLLBACK when it throws. */
  withTransaction<T>(fn: (tx: ProjectionTransaction) => Promise<T>): Promise<T>;
  taskIdOfSession(sessionId: string): Promise<string | undefined>;
  /** Task ids in id order after `afterTaskId` (keyset pages). */
  listTaskIdsAfter(afterTaskId: string | null, limit: number): Promise<string[]>;
  /** Pending states read outside a projection (reconcile's comparison). */
  loadPendingStates(taskIds: readonly string[]): Promise<Map<string, TaskPendingState>>;
  loadStatusSummaries(taskIds: readonly string[]): Promise<Map<string, StoredStatusSummary>>;
  /** Stored summaries in task id order after `afterTaskId` (keyset pages). */
  listStatusSummariesAfter(afterTaskId: string | null, limit: number): Promise<StoredStatusSummary[]>;
}

export interface ProjectionStoreOptions {
  /** Where queued prompts are; detected from the catalog once, at the first read, when not given. */
  queue?: QueuedPromptTables;
}

/**
 * The projection store over `ctx`. Every pending state it reads carries `queuedPromptCount`, which
 * the projector owns (the summary's `queued_prompt_count`): so every store knows where the queued prompts are, from the
 * options or from one catalog read (on whichever context reads first: inside a projection
 * transaction that is the transaction, as SQLite's single connection requires).
 */
export function createProjectionStore(ctx: RepositoryContext, options: ProjectionStoreOptions = {}): ProjectionStore {
  let queue: Promise<QueuedPromptTables> | undefined = options.queue ? Promise.resolve(options.queue) : undefined;
  const queueTables = (on: RepositoryContext) => {
    queue ??= detectQueuedPromptTables(on).catch((err: unknown) => {
      queue = undefined;
      throw err;
    });
    return queue;
  };
  const pendingStates = async (on: RepositoryContext, taskIds: readonly string[]) => loadTaskPendingStates(on, taskIds, await queueTables(on));
  return {
    capabilities: { singleWriter: ctx.dialect.singleWriter, releasesSlotBeforeCommit: ctx.dialect.releasesSlotBeforeCommit },
    withTransaction: (fn) => beginOrJoin(ctx, (tx) => fn(projectionTransaction(tx, pendingStates))),
    taskIdOfSession: (sessionId) => taskIdOfSession(ctx, sessionId),
    listTaskIdsAfter: (afterTaskId, limit) => listTaskIdsAfter(ctx, afterTaskId, limit),
    loadPendingStates: (taskIds) => pendingStates(ctx, taskIds),
    loadStatusSummaries: (taskIds) => loadStatusSummaries(ctx, taskIds),
    listStatusSummariesAfter: (afterTaskId, limit) => listStatusSummariesAfter(ctx, afterTaskId, limit),
  };
}

function projectionTransaction(
  tx: RepositoryContext,
  pendingStates: (on: RepositoryContext, taskIds: readonly string[]) => Promise<Map<string, TaskPendingState>>,
): ProjectionTransaction {
  return {
    readSummariesForUpdate: (taskIds) => readStatusSummariesForUpdate(tx, taskIds),
    readSummaryWrites: (taskIds) => readSummaryWrites(tx, taskIds),
    recordSummaryWrites: (writes) => recordSummaryWrites(tx, writes),
    recordForeignSummaryWrites: (found) => recordForeignSummaryWrites(tx, found),
    loadPendingStates: (taskIds) => pendingStates(tx, taskIds),
    compareAndSet: (rows) => compareAndSetStatusSummaries(tx, rows),
    overwriteLocked: (rows) => overwriteLockedStatusSummaries(tx, rows),
    restore: (restores) => restoreStatusSummaries(tx, restores),
    now: () => tx.clock(),
  };
}
