import { kandevModeMigrations, migrations } from '../../../migrations/index.js';
import { ERROR_CODES, PendingProjectorError } from '../../errors.js';
import { SCHEMA_MODE_SETTINGS } from '../../settingValues.js';
import { catalogRows, tableColumns, type SchemaTarget } from './catalog.js';
import { missingSearchPathSchema, SearchPathSchemaMissingError } from './searchPath.js';
import { MIGRATIONS_TABLE, SERVICE_TABLES, SERVICE_TABLE_NAMES, type ServiceTable } from './serviceTables.js';

/**
 * Who owns the schema, decided from the catalog before anything is migrated:
 * - `owned`: this service created Kandev's tables itself (migration 0001 onwards), on a database
 *   that was empty;
 * - `kandev`: Kandev's backend created them; this service adds only objects of its own beside them
 *   and never creates, alters or drops a Kandev table, column or index.
 */
const SCHEMA_MODES = ['owned', 'kandev'] as const satisfies readonly SchemaModeSetting[];
export type SchemaMode = (typeof SCHEMA_MODES)[number];

/** The SCHEMA_MODE setting: `auto` detects, the others force a mode (and are refused where it does not fit). */
export type SchemaModeSetting = (typeof SCHEMA_MODE_SETTINGS)[number];

/**
 * What the catalog shows, before any setting:
 * - `empty`: none of the tables the service reads, and no migration of ours recorded;
 * - `owned`: owned-mode migrations are recorded (this service created the tables);
 * - `kandev`: every table the service reads exists, no owned-mode migration is recorded;
 * - `partial`: some of those tables exist and some do not, or migrations of both modes are recorded.
 * A missing column does not change the shape; it is listed in `missingColumns`, and refused.
 */
type SchemaShape = 'empty' | 'owned' | 'kandev' | 'partial';

interface ColumnReport {
  readonly name: string;
  readonly present: boolean;
  /** As the catalog spells it; null when absent. */
  readonly type: string | null;
}

interface TableReport {
  readonly table: ServiceTable;
  readonly present: boolean;
  /** Every column the service reads, in SERVICE_TABLES order (all absent when the table is). */
  readonly columns: readonly ColumnReport[];
}

export interface SchemaDetection {
  readonly shape: SchemaShape;
  /** Every table the service reads, with every column it reads. */
  readonly tables: readonly TableReport[];
  readonly missingTables: readonly ServiceTable[];
  /** `table.column`, for tables that exist. */
  readonly missingColumns: readonly string[];
  /** Names recorded in pending_projector_migrations, by mode. */
  readonly ownedMigrations: readonly string[];
  readonly kandevModeMigrations: readonly string[];
}

const OWNED_NAMES = new Set(migrations.map((m) => m.name));
const KANDEV_MODE_NAMES = new Set(kandevModeMigrations.map((m) => m.name));
// A name recorded by a later version of this service is classified by its prefix.
const isKandevModeName = (name: string) => KANDEV_MODE_NAMES.has(name) || (!OWNED_NAMES.has(name) && name.startsWith('kandev_mode_'));

/** Reads the catalog: which of the service's tables and columns exist, and which migrations are recorded. */
export async function detectSchema(target: SchemaTarget): Promise<SchemaDetection> {
  const catalog = await tableColumns(target, [...SERVICE_TABLE_NAMES, MIGRATIONS_TABLE]);
  const tables: TableReport[] = SERVICE_TABLE_NAMES.map((table) => {
    const found = catalog.get(table);
    const types = new Map((found ?? []).map((column) => [column.name.toLowerCase(), column.type]));
    return {
      table,
      present: found !== undefined,
      columns: SERVICE_TABLES[table].map((name) => ({ name, present: types.has(name), type: types.get(name) ?? null })),
    };
  });
  const recorded = catalog.has(MIGRATIONS_TABLE)
    ? (await catalogRows<{ name: string }>(target, `SELECT name FROM ${MIGRATIONS_TABLE} ORDER BY id`)).map((row) => String(row.name))
    : [];
  const ownedMigrations = recorded.filter((name) => !isKandevModeName(name));
  const kandevMode = recorded.filter(isKandevModeName);
  const missingTables = tables.filter((t) => !t.present).map((t) => t.table);
  const missingColumns = tables.filter((t) => t.present).flatMap((t) => t.columns.filter((c) => !c.present).map((c) => `${t.table}.${c.name}`));
  const presentCount = tables.length - missingTables.length;
  let shape: SchemaShape;
  if (ownedMigrations.length > 0 && kandevMode.length > 0) shape = 'partial';
  else if (ownedMigrations.length > 0) shape = 'owned';
  else if (presentCount === 0 && kandevMode.length === 0) shape = 'empty';
  else if (missingTables.length === 0) shape = 'kandev';
  else shape = 'partial';
  return { shape, tables, missingTables, missingColumns, ownedMigrations, kandevModeMigrations: kandevMode };
}

export type SchemaModeDecision =
  | { readonly ok: true; readonly mode: SchemaMode; /** Why, for a person. */ readonly because: string }
  | {
      readonly ok: false;
      readonly headline: string;
      /** Every missing table and column, and what a forced mode would do. */ readonly problems: readonly string[];
    };

function missingProblems(detection: SchemaDetection): string[] {
  return [
    ...detection.missingTables.map((table) => `missing table ${table} (the service reads ${SERVICE_TABLES[table].join(', ')})`),
    ...detection.missingColumns.map((column) => `missing column ${column}`),
  ];
}

const OWNED_CREATES_KANDEV_TABLES =
  "SCHEMA_MODE=owned runs this service's migration 0001, which creates Kandev's tables " +
  `(${SERVICE_TABLE_NAMES.join(', ')}); on a database where Kandev's tables exist it would fail or create them beside Kandev's. Use SCHEMA_MODE=auto or kandev`;

/** The mode for `detection` under `setting`, or why this database is refused. A pure function. */
export function decideSchemaMode(detection: SchemaDetection, setting: SchemaModeSetting): SchemaModeDecision {
  const missing = missingProblems(detection);
  const refuse = (headline: string, problems: string[]): SchemaModeDecision => ({ ok: false, headline, problems });
  switch (detection.shape) {
    case 'empty':
      if (setting === 'kandev') return refuse("SCHEMA_MODE=kandev, but it has none of Kandev's tables", missing);
      return {
        ok: true,
        mode: 'owned',
        because: setting === 'owned' ? 'SCHEMA_MODE=owned on an empty database' : "the database has none of Kandev's tables: this service creates them",
      };
    case 'owned':
      if (setting === 'kandev') {
        return refuse('SCHEMA_MODE=kandev, but this service created its tables (owned mode)', [
          `owned-mode migrations recorded in ${MIGRATIONS_TABLE}: ${detection.ownedMigrations.join(', ')}; use SCHEMA_MODE=auto or owned`,
        ]);
      }
      if (missing.length > 0) return refuse('this service created its tables, and some it reads, or their columns, are gone', missing);
      return { ok: true, mode: 'owned', because: `owned-mode migrations are recorded in ${MIGRATIONS_TABLE}` };
    case 'kandev':
      if (setting === 'owned') return refuse("SCHEMA_MODE=owned, but Kandev's tables already exist", [OWNED_CREATES_KANDEV_TABLES, ...missing]);
      if (missing.length > 0) return refuse("it has Kandev's tables, but not every column the service reads", missing);
      return { ok: true, mode: 'kandev', because: "Kandev's tables exist: this service adds only its own objects beside them" };
    case 'partial': {
      const forced = setting === 'owned' ? [OWNED_CREATES_KANDEV_TABLES] : [];
      if (detection.ownedMigrations.length > 0) {
        const recorded = [...detection.ownedMigrations, ...detection.kandevModeMigrations].join(', ');
        return refuse(`${MIGRATIONS_TABLE} records migrations of both modes (${recorded})`, missing);
      }
      if (detection.missingTables.length === detection.tables.length) {
        return refuse(`Kandev-mode migrations are recorded in ${MIGRATIONS_TABLE}, but Kandev's tables are gone`, [...missing, ...forced]);
      }
      return refuse('it has some of the Kandev tables the service reads, but not all of them', [...missing, ...forced]);
    }
  }
}

/** A database this service refuses to migrate or run on; `problems` names every missing table and column. */
export class SchemaRefusedError extends PendingProjectorError {
  override name = 'SchemaRefusedError';
  constructor(
    readonly headline: string,
    readonly problems: readonly string[],
  ) {
    super(ERROR_CODES.SCHEMA_REFUSED, `refusing this database: ${headline}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/**
 * Detects the schema and decides its mode under `setting`; throws SchemaRefusedError when refused,
 * and SearchPathSchemaMissingError (a configuration error) when PostgreSQL's search_path selects no
 * schema, where the database would only look empty.
 */
export async function resolveSchemaMode(
  target: SchemaTarget,
  setting: SchemaModeSetting,
): Promise<{ mode: SchemaMode; because: string; detection: SchemaDetection }> {
  const missing = await missingSearchPathSchema(target);
  if (missing) throw new SearchPathSchemaMissingError(missing);
  const detection = await detectSchema(target);
  const decision = decideSchemaMode(detection, setting);
  if (!decision.ok) throw new SchemaRefusedError(decision.headline, decision.problems);
  return { mode: decision.mode, because: decision.because, detection };
}
