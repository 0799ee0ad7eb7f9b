import type { Knex } from 'knex';
import { coerceError } from '../../errors.js';
import type { SqlDialect } from '../dialect.js';
import { inspectIndex, inspectRequiredIndexes, type IndexInspection } from './indexInspection.js';
import type { RequiredIndex } from './requiredIndexes.js';

/** One step of `addMissingIndexes`, reported as it happens (a build can take long on a big table). */
export type IndexBuildEvent =
  | { readonly kind: 'dropping-invalid'; readonly index: RequiredIndex }
  | { readonly kind: 'building'; readonly index: RequiredIndex; readonly statement: string }
  | { readonly kind: 'built'; readonly index: RequiredIndex; readonly elapsedMs: number }
  | { readonly kind: 'failed'; readonly index: RequiredIndex; readonly error: Error }
  /** A different index (or another relation) holds the name: left alone, never replaced. */
  | { readonly kind: 'left-alone'; readonly index: RequiredIndex; readonly inspection: IndexInspection };

export interface AddIndexesOutcome {
  /** Names built by this run. */
  readonly created: readonly string[];
  readonly failed: ReadonlyArray<{ readonly name: string; readonly message: string }>;
  /** Every required index as the catalog reports it after the run. */
  readonly after: readonly IndexInspection[];
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The statement that builds `index`: on PostgreSQL CONCURRENTLY, so writers are not blocked meanwhile. */
function buildStatement(dialect: SqlDialect, index: RequiredIndex): string {
  return index.create.replace(/^CREATE INDEX /, `${dialect.createIndexOnline} `);
}

/**
 * Builds every required index the catalog lacks, one at a time: PostgreSQL `CREATE INDEX
 * CONCURRENTLY` (outside any transaction, so `target` must be a pool, not a transaction), SQLite
 * `CREATE INDEX`. An INVALID index a failed concurrent build left behind is dropped (concurrently)
 * and rebuilt; an index of another definition under a required name is left alone and stays
 * reported. A failed build is reported and the next index is tried: on PostgreSQL it leaves an
 * INVALID index, which the next run drops and rebuilds. Never called implicitly.
 */
export async function addMissingIndexes(
  target: { readonly knex: Knex; readonly dialect: SqlDialect },
  onEvent: (event: IndexBuildEvent) => void = () => undefined,
): Promise<AddIndexesOutcome> {
  const created: string[] = [];
  const failed: Array<{ name: string; message: string }> = [];
  for (const inspection of await inspectRequiredIndexes(target)) {
    const { index } = inspection;
    if (inspection.state === 'present') continue;
    if (inspection.state === 'different') {
      onEvent({ kind: 'left-alone', index, inspection });
      continue;
    }
    try {
      if (inspection.state === 'invalid') {
        onEvent({ kind: 'dropping-invalid', index });
        const qualified = inspection.schema ? `${quoteIdentifier(inspection.schema)}.${quoteIdentifier(index.name)}` : quoteIdentifier(index.name);
        await target.knex.raw(`DROP INDEX CONCURRENTLY IF EXISTS ${qualified}`);
      }
      const statement = buildStatement(target.dialect, index);
      onEvent({ kind: 'building', index, statement });
      const started = performance.now();
      await target.knex.raw(statement);
      // A concurrent build that returned yet left an unusable index counts as failed.
      const built = await inspectIndex(target, index);
      if (built.state !== 'present') throw new Error(`after the build the index is ${built.state}`);
      created.push(index.name);
      onEvent({ kind: 'built', index, elapsedMs: performance.now() - started });
    } catch (err) {
      const error = coerceError(err);
      failed.push({ name: index.name, message: error.message });
      onEvent({ kind: 'failed', index, error });
    }
  }
  return { created, failed, after: await inspectRequiredIndexes(target) };
}
