import { instantAfter, systemClock } from '../../timestamps.js';
import { listForeignSummaryWrites, type RecordedForeignSummaryWrite } from '../projection/summaryWrites.js';
import { tableColumns, type SchemaTarget } from '../schema/catalog.js';

/**
 * Summary rows the worker found written by another writer of the fields this service owns, as its
 * projections recorded them in `pending_projector_summary_writes` (ADR 0018): the tasks with one in
 * the last `hours`, the newest first.
 */
export interface RecentForeignWrites {
  readonly hours: number;
  readonly tasks: number;
  readonly examples: readonly RecordedForeignSummaryWrite[];
}

const FOREIGN_WRITES_HOURS = 24;

/** Null when the table is not there yet (its migration is still to run: nothing was recorded). */
export async function findRecentForeignWrites(target: SchemaTarget, examples = 5, hours = FOREIGN_WRITES_HOURS): Promise<RecentForeignWrites | null> {
  if (!(await tableColumns(target, ['pending_projector_summary_writes'])).has('pending_projector_summary_writes')) return null;
  const since = instantAfter(systemClock(), -hours * 3_600_000);
  const { tasks, recent } = await listForeignSummaryWrites({ ...target, clock: systemClock }, since, examples);
  return { hours, tasks, examples: recent };
}
