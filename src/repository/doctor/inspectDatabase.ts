import { kandevModeMigrations, migrations } from '../../../migrations/index.js';
import { withTimestampForms, type DialectName } from '../dialect.js';
import { detectTimestampForms } from '../timestampForms.js';
import { systemClock } from '../../timestamps.js';
import type { SchemaTarget } from '../schema/catalog.js';
import { inspectRequiredIndexes, type IndexInspection } from '../schema/indexInspection.js';
import { missingSearchPathSchema, type MissingSearchPathSchema } from '../schema/searchPath.js';
import { decideSchemaMode, detectSchema, type SchemaDetection, type SchemaModeDecision, type SchemaModeSetting } from '../schema/schemaMode.js';
import { scanMetadata, type MetadataScan, type MetadataScanProgress } from './metadataScan.js';
import { findRecentForeignWrites, type RecentForeignWrites } from './foreignWrites.js';
import { findSeveralOpenTurns, type SeveralOpenTurns } from './openTurns.js';
import { sampleTimestampForms, type TimestampColumnFinding } from './timestampTextForms.js';

/**
 * Everything `pending-projector doctor` reads, as values: the schema and the mode this service
 * would run in, the indexes the current-turn queries need, the timestamp forms, the metadata that
 * reads as no keys, sessions with several open turns, the turn markers, and the summary rows the
 * worker recently found written by another writer of its fields. It only reads (SELECTs
 * and catalog reads; open the database read-only to be sure) and judges nothing: what is a warning
 * is the command's business. A check whose table or columns are missing reports what it could not
 * read instead of failing, so a refused schema still gets every other finding.
 */
export interface DatabaseInspection {
  readonly dialect: DialectName;
  /** PostgreSQL: the search_path selects no existing schema (every other finding then reads an empty database). */
  readonly missingSchema: MissingSearchPathSchema | null;
  readonly setting: SchemaModeSetting;
  readonly detection: SchemaDetection;
  readonly decision: SchemaModeDecision;
  /** The migrations the decided mode would apply (`migrate`, or the worker at start); empty when refused. */
  readonly pendingMigrations: readonly string[];
  readonly indexes: readonly IndexInspection[];
  /** Rows sampled per timestamp column. */
  readonly sampleRows: number;
  readonly timestamps: readonly TimestampColumnFinding[];
  readonly metadata: MetadataScan;
  /** Null when task_session_turns or its task_session_id / completed_at is missing. */
  readonly openTurns: SeveralOpenTurns | null;
  /** Null when this service's record of summary writes is not there (its migration is still to run). */
  readonly foreignWrites: RecentForeignWrites | null;
}

export type InspectionProgress =
  { readonly check: 'schema' | 'indexes' | 'timestamps' | 'open_turns' | 'foreign_writes' } | ({ readonly check: 'metadata' } & MetadataScanProgress);

export interface InspectionOptions {
  readonly schemaMode: SchemaModeSetting;
  /** Newest rows sampled per timestamp column. */
  readonly sampleRows: number;
  /** Told as each check starts, and after every page of the metadata scan. */
  readonly onProgress?: (progress: InspectionProgress) => void;
}

function pendingFor(decision: SchemaModeDecision, detection: SchemaDetection): string[] {
  if (!decision.ok) return [];
  const recorded = new Set(decision.mode === 'owned' ? detection.ownedMigrations : detection.kandevModeMigrations);
  return (decision.mode === 'owned' ? migrations : kandevModeMigrations).map((m) => m.name).filter((name) => !recorded.has(name));
}

function turnsReadable(detection: SchemaDetection): boolean {
  const turns = detection.tables.find((t) => t.table === 'task_session_turns');
  return turns !== undefined && turns.present && ['task_session_id', 'completed_at'].every((name) => turns.columns.some((c) => c.name === name && c.present));
}

/**
 * `target` with the timestamp forms the worker would detect, so the report asks for the indexes the
 * worker's statements would use (beside Kandev's SQLite rows, the current-turn order over keys).
 * A schema too incomplete to sample keeps the plain dialect: it is refused anyway.
 */
async function asTheWorkerWouldRead(target: SchemaTarget, detection: SchemaDetection, decision: SchemaModeDecision): Promise<SchemaTarget> {
  if (detection.shape === 'partial' || detection.shape === 'empty') return target;
  const kandevSchema = decision.ok ? decision.mode === 'kandev' : detection.shape === 'kandev';
  const { forms } = await detectTimestampForms({ knex: target.knex, dialect: target.dialect, clock: systemClock }, { kandevSchema });
  return { knex: target.knex, dialect: withTimestampForms(target.dialect, forms) };
}

export async function inspectDatabase(target: SchemaTarget, options: InspectionOptions): Promise<DatabaseInspection> {
  const progress = options.onProgress ?? (() => undefined);
  progress({ check: 'schema' });
  const missingSchema = (await missingSearchPathSchema(target)) ?? null;
  const detection = await detectSchema(target);
  const decision = decideSchemaMode(detection, options.schemaMode);
  progress({ check: 'indexes' });
  const indexes = await inspectRequiredIndexes(await asTheWorkerWouldRead(target, detection, decision));
  progress({ check: 'timestamps' });
  const timestamps = await sampleTimestampForms(target, detection, options.sampleRows);
  const metadata = await scanMetadata(target, detection, (scan) => progress({ check: 'metadata', ...scan }));
  progress({ check: 'open_turns' });
  const openTurns = turnsReadable(detection) ? await findSeveralOpenTurns(target) : null;
  progress({ check: 'foreign_writes' });
  const foreignWrites = await findRecentForeignWrites(target);
  return {
    dialect: target.dialect.name,
    missingSchema,
    setting: options.schemaMode,
    detection,
    decision,
    pendingMigrations: pendingFor(decision, detection),
    indexes,
    sampleRows: options.sampleRows,
    timestamps,
    metadata,
    openTurns,
    foreignWrites,
  };
}
