import type { Logger } from 'pino';
import { OWNED_SUMMARY_FIELDS, ownedFieldsOf, parseStoredSummary, SummaryParseError, type OwnedSummaryField } from '../events/statusSummary.js';
import type { StoredStatusSummary, SummaryWriteRecord } from '../repository/projection/projectionStore.js';

/**
 * A second writer of the owned summary fields (ADR 0018). Vocabulary:
 * - the *record*: what this service last wrote into a task's summary row (revision and owned
 *   fields), written by every replica in the transaction of its compare-and-set;
 * - a *foreign write*: a summary row, read under the projection's lock, whose revision is not the
 *   record's, and with an owned field that differs both from the record (someone else changed it)
 *   and from this projection's fresh derivation (it is wrong by this service's rule, so the
 *   projection rewrites it and the two writers alternate).
 * Another replica's write is never foreign: it wrote the record too.
 */

/** One owned field another writer changed: what the row holds, what this service last wrote, what it derives now. */
export interface ForeignFieldChange {
  field: OwnedSummaryField;
  stored: unknown;
  lastWritten: unknown;
  derived: unknown;
}

export interface ForeignWriteFinding {
  taskId: string;
  /** The revision of the row the other writer wrote. */
  revision: number;
  changes: readonly ForeignFieldChange[];
}

/** The owned fields of a summary text as the record stores them (`ownedFields`). */
export function ownedFieldsText(summaryText: string): string {
  return JSON.stringify(ownedFieldsOf(parseStoredSummary(summaryText)));
}

const duration = (ms: number) => (ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`);

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/**
 * The foreign write in a locked row, if it is one. `derivedSummary` is the summary text this
 * projection decided to write (a task it leaves unchanged already holds the derivation, so it has
 * no foreign write to report). Undefined without a record (the row predates this service's first
 * write, so there is nothing to compare with), for the recorded revision or the last one already
 * reported, and for a row no consumer can read (the projection replaces it and says so).
 */
export function findForeignWrite(stored: StoredStatusSummary | undefined, record: SummaryWriteRecord | undefined, derivedSummary: string) {
  if (!stored || !record || stored.revision === record.revision || stored.revision === record.foreignRevision) return undefined;
  let current: Record<OwnedSummaryField, unknown>;
  let lastWritten: Record<OwnedSummaryField, unknown>;
  try {
    current = ownedFieldsOf(parseStoredSummary(stored.summary));
    lastWritten = ownedFieldsOf(parseStoredSummary(record.ownedFields));
  } catch (err) {
    if (err instanceof SummaryParseError) return undefined;
    throw err;
  }
  const derived = ownedFieldsOf(parseStoredSummary(derivedSummary));
  const changes = OWNED_SUMMARY_FIELDS.filter((field) => !same(current[field], lastWritten[field]) && !same(current[field], derived[field])).map(
    (field): ForeignFieldChange => ({ field, stored: current[field], lastWritten: lastWritten[field], derived: derived[field] }),
  );
  return changes.length > 0 ? ({ taskId: stored.taskId, revision: stored.revision, changes } satisfies ForeignWriteFinding) : undefined;
}

export interface ForeignWriteWatchOptions {
  logger: Logger;
  /** Each field of every foreign write found (the metric). */
  onFound?: (field: OwnedSummaryField) => void;
  /** The window in which a task's foreign writes are counted and it is warned of once. */
  windowMs?: number;
  /** Foreign writes of one task within a window before the warning: one alone may be a person's repair. */
  repeats?: number;
  /** Tasks remembered at most; the least recently seen is forgotten first. */
  maxTasks?: number;
  now?: () => number;
}

/** Ten minutes: Kandev's projector rewrites a summary within seconds of every change, so a live second writer repeats well within it. */
const FOREIGN_WRITE_WINDOW_MS = 600_000;
const FOREIGN_WRITE_REPEATS = 2;
const FOREIGN_WRITE_MAX_TASKS = 10_000;

export interface ForeignWriteWatch {
  /** Counts a foreign write; warns once per task per window when they repeat. */
  observe(finding: ForeignWriteFinding): void;
}

/**
 * Counts foreign writes per task in a window that starts at the task's first one, and warns once
 * in that window when they reach `repeats`. Per process: with several replicas each counts the
 * foreign writes it read, so a task is warned of at most once per replica per window.
 */
export function createForeignWriteWatch(options: ForeignWriteWatchOptions): ForeignWriteWatch {
  const windowMs = options.windowMs ?? FOREIGN_WRITE_WINDOW_MS;
  const repeats = options.repeats ?? FOREIGN_WRITE_REPEATS;
  const maxTasks = options.maxTasks ?? FOREIGN_WRITE_MAX_TASKS;
  const now = options.now ?? Date.now;
  // Insertion order is recency order: a task seen again is moved to the end.
  const windows = new Map<string, { startedAt: number; count: number; warned: boolean }>();
  return {
    observe(finding) {
      for (const change of finding.changes) options.onFound?.(change.field);
      const at = now();
      let window = windows.get(finding.taskId);
      windows.delete(finding.taskId);
      if (!window || at - window.startedAt >= windowMs) window = { startedAt: at, count: 0, warned: false };
      window.count++;
      windows.set(finding.taskId, window);
      if (windows.size > maxTasks) windows.delete(windows.keys().next().value!);
      const fields = finding.changes.map((c) => c.field);
      const context = {
        taskId: finding.taskId,
        revision: finding.revision,
        fields,
        stored: Object.fromEntries(finding.changes.map((c) => [c.field, c.stored])),
        lastWritten: Object.fromEntries(finding.changes.map((c) => [c.field, c.lastWritten])),
        derived: Object.fromEntries(finding.changes.map((c) => [c.field, c.derived])),
      };
      if (window.warned || window.count < repeats) {
        options.logger.debug(context, 'summary row written by another writer');
        return;
      }
      window.warned = true;
      const them = fields.length === 1 ? 'it' : 'them';
      options.logger.warn(
        { ...context, times: window.count, windowMs },
        `task ${finding.taskId}: another writer keeps writing ${fields.join(' and ')} into its status summary ` +
          `(${window.count} times within ${duration(windowMs)}, last at revision ${finding.revision}); this service owns ${them} and rewrites ${them}, ` +
          `so the two writers alternate revisions: stop the other writer from writing ${them} (docs/kandev.md#one-owner-per-field)`,
      );
    },
  };
}
