import { parseStoredSummary, SummaryParseError, toPublishedSummary } from '../events/statusSummary.js';
import type { ProjectionStore } from '../repository/projection/projectionStore.js';
import type { SummaryUpdate } from './ports.js';

export interface RefillProgress {
  /** Stored summaries read. */
  visited: number;
  /** Keys that were empty and now hold the stored summary. */
  filled: number;
  /** Rows no consumer can read (reconcile replaces them); left out of the bucket. */
  corrupt: number;
}

/** The stored summaries, as the bucket refill reads them (the projection store's rows). */
export interface StoredSummaries extends Pick<ProjectionStore, 'listStatusSummariesAfter'> {
  /** Summaries stored now: the keys a full bucket holds. */
  countStatusSummaries(): Promise<number>;
}

export interface RefillOptions {
  store: Pick<StoredSummaries, 'listStatusSummariesAfter'>;
  pageSize: number;
  /** Puts one summary into the bucket if its key is empty; false when the key was taken. */
  fill(update: SummaryUpdate): Promise<boolean>;
  shouldStop?: () => boolean;
  onPage?: (progress: RefillProgress) => void;
}

/**
 * Copies every stored summary into the bus's KV bucket where its key is empty, in keyset pages
 * (bounded memory), after the bus lost the bucket (memory storage and a server restart). Only empty
 * keys are filled: an entry there was put by a projection, which puts every later revision too, so a
 * refill racing live projections cannot move a task's entry back to the row it read.
 */
export async function refillSummaryBucket(options: RefillOptions): Promise<RefillProgress> {
  const progress: RefillProgress = { visited: 0, filled: 0, corrupt: 0 };
  let after: string | null = null;
  while (!options.shouldStop?.()) {
    const page = await options.store.listStatusSummariesAfter(after, options.pageSize);
    if (page.length === 0) break;
    const updates: SummaryUpdate[] = [];
    for (const row of page) {
      try {
        updates.push({
          taskId: row.taskId,
          workspaceId: row.workspaceId,
          summary: toPublishedSummary(parseStoredSummary(row.summary), row.revision, row.updatedAt),
        });
      } catch (err) {
        if (!(err instanceof SummaryParseError)) throw err;
        progress.corrupt++;
      }
    }
    const filled = await Promise.all(updates.map((u) => options.fill(u)));
    progress.visited += page.length;
    progress.filled += filled.filter(Boolean).length;
    after = page[page.length - 1]!.taskId;
    options.onPage?.({ ...progress });
  }
  return progress;
}
