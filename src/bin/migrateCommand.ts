import type { Config } from '../config.js';
import { addMissingIndexes, type IndexBuildEvent } from '../repository/schema/addIndexes.js';
import { inspectRequiredIndexes, unservedIndexes, type IndexInspection } from '../repository/schema/indexInspection.js';
import { migrateSchema } from '../repository/migrate.js';
import { ADD_INDEXES_COMMAND } from './addIndexesCommand.js';
import { storesOf } from './assembly.js';
import { connectDatabase } from './connectDatabase.js';
import type { MigrateSettings } from './commandSettings.js';

/** One line per required index that is not there, for a person: what holds its name and what to do. */
export function describeUnservedIndex(inspection: IndexInspection): string {
  const { index } = inspection;
  const what = `index ${index.name} on ${index.table}`;
  switch (inspection.state) {
    case 'present':
      return `${what}: present`;
    case 'missing':
      return `${what}: missing (serves ${index.serves})`;
    case 'invalid':
      return `${what}: INVALID, left by a CREATE INDEX CONCURRENTLY that failed; --add-indexes drops and rebuilds it`;
    case 'different':
      return `${what}: a different index holds this name (${inspection.found}); it is left alone: drop it if it is a leftover, then run --add-indexes`;
  }
}

/**
 * The index part of `migrate`'s report: the ones missing, and the command that adds them, for the
 * database `description` names (passwords masked, so the report can be pasted anywhere).
 */
function indexReport(inspections: readonly IndexInspection[], target: { description: string; schemaMode: Config['schemaMode'] }): string {
  const unserved = unservedIndexes(inspections);
  if (unserved.length === 0) return `indexes: all ${inspections.length} the current-turn queries need are present\n`;
  return (
    unserved.map((inspection) => `${describeUnservedIndex(inspection)}\n`).join('') +
    `${unserved.length} of ${inspections.length} indexes the current-turn queries need are not there: the queries work without them, only slower.\n` +
    `Add them with: ${addIndexesCommandLine(target)}\n`
  );
}

/** The full command that adds the missing indexes to the database `description` names (password masked). */
export function addIndexesCommandLine(target: { description: string; schemaMode: Config['schemaMode'] }): string {
  const flags = [`--database-url '${target.description}'`, ...(target.schemaMode === 'auto' ? [] : [`--schema-mode ${target.schemaMode}`])];
  return `${ADD_INDEXES_COMMAND} ${flags.join(' ')}`;
}

function progressLine(event: IndexBuildEvent): string {
  const name = event.index.name;
  switch (event.kind) {
    case 'dropping-invalid':
      return `dropping INVALID index ${name} (left by a failed concurrent build)\n`;
    case 'building':
      return `building index ${name} on ${event.index.table}: ${event.statement}\n`;
    case 'built':
      return `built index ${name} in ${(event.elapsedMs / 1000).toFixed(1)} s\n`;
    case 'failed':
      return `failed to build index ${name}: ${event.error.message}\n`;
    case 'left-alone':
      return `left index ${name} alone: a different index holds this name (${event.inspection.found})\n`;
  }
}

/**
 * `migrate`: decides the schema mode, applies that mode's migrations, then reports the indexes the
 * queries need that are not there (exit 0: the queries still work). With `addIndexes`, builds them
 * too, reporting each on stderr as it goes; exit 0 when all are present afterwards, 1 otherwise.
 * A refused database throws SchemaRefusedError (exit 2 through the CLI, with every problem named);
 * one that cannot be reached a ConnectionFailedError naming DATABASE_URL.
 */
export async function runMigrateCommand(config: MigrateSettings, options: { addIndexes: boolean }): Promise<number> {
  const db = await connectDatabase(config);
  try {
    const { mode, because, applied } = await migrateSchema(db, config.schemaMode);
    process.stdout.write(`schema mode: ${mode} (${because})\n`);
    process.stdout.write(applied.length ? `applied ${applied.join(', ')} to ${db.description}\n` : `${db.description} is up to date\n`);
    // Which indexes serve the queries depends on the timestamp forms the stores detect.
    const stores = await storesOf(db, { setting: config.timestampForm, kandevSchema: mode === 'kandev' });
    if (!options.addIndexes) {
      process.stdout.write(indexReport(await inspectRequiredIndexes(stores), { description: db.description, schemaMode: config.schemaMode }));
      return 0;
    }
    const outcome = await addMissingIndexes(stores, (event) => process.stderr.write(progressLine(event)));
    process.stdout.write(indexReport(outcome.after, { description: db.description, schemaMode: config.schemaMode }));
    return unservedIndexes(outcome.after).length === 0 ? 0 : 1;
  } finally {
    await db.destroy();
  }
}
