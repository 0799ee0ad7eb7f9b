/** How much projection work runs at once; computed once, where the worker is assembled. */
export interface ProjectionCapacity {
  /** Tasks one projection transaction takes at most. */
  readonly batchSize: number;
  /** Projection transactions holding a slot at once. */
  readonly transactions: number;
  /** Distinct tasks queued for or inside a transaction, or publishing after one. */
  readonly tasksInFlight: number;
}

export interface ProjectionCapacityInput {
  /** Tasks one projection transaction takes at most (the `PROJECTION_BATCH_SIZE` setting). */
  batchSize: number;
  /** Projection transactions wanted at once (`PROJECTION_TRANSACTIONS`), default 1. */
  transactions?: number;
  /**
   * Database connections projections may hold at once (the PostgreSQL pool; SQLite: 1), default
   * `transactions`. A batch that gave up its slot still holds one until its COMMIT is done.
   */
  connections?: number;
  /** The database has one writer (SQLite): a second transaction would only queue behind the first. */
  singleWriter: boolean;
}

/**
 * The projection scheduler's limits. Transactions: as many as asked, but no more than the
 * connections or the batch size, and one on a single writer. Tasks in flight: a full batch for
 * every connection (a slot's, or a COMMIT's after its batch gave the slot up) plus one batch past
 * COMMIT publishing its session changes. Counting only the slots' batches, a COMMIT stuck on a slow
 * WAL flush held back every task due behind it, as if it still held its slot.
 */
export function projectionCapacity(input: ProjectionCapacityInput): ProjectionCapacity {
  const { batchSize } = input;
  if (!(Number.isSafeInteger(batchSize) && batchSize >= 1)) throw new RangeError(`batch size must be a positive integer, got ${batchSize}`);
  const wanted = input.singleWriter ? 1 : (input.transactions ?? 1);
  const transactions = Math.max(1, Math.min(wanted, input.connections ?? wanted, batchSize));
  const connections = Math.max(transactions, input.connections ?? transactions);
  return { batchSize, transactions, tasksInFlight: (connections + 1) * batchSize };
}
