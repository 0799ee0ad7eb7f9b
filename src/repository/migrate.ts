import type { Knex } from 'knex';
import { kandevModeMigrations, migrations, type Migration } from '../../migrations/index.js';
import type { SqlDialect } from './dialect.js';
import { resolveSchemaMode, type SchemaDetection, type SchemaMode, type SchemaModeSetting } from './schema/schemaMode.js';
import { MIGRATIONS_TABLE } from './schema/serviceTables.js';

class StaticMigrationSource implements Knex.MigrationSource<Migration> {
  constructor(private readonly list: readonly Migration[]) {}
  async getMigrations() {
    return [...this.list];
  }
  getMigrationName(migration: Migration) {
    return migration.name;
  }
  async getMigration(migration: Migration) {
    return migration;
  }
}

// One bookkeeping table for both modes: a mode's names never occur in the other's list, and knex
// refuses to run a list that lacks a recorded name, so a database migrated in one mode cannot be
// migrated in the other by mistake.
const CONFIGS: Record<SchemaMode, Knex.MigratorConfig> = {
  owned: { migrationSource: new StaticMigrationSource(migrations), tableName: MIGRATIONS_TABLE },
  kandev: { migrationSource: new StaticMigrationSource(kandevModeMigrations), tableName: MIGRATIONS_TABLE },
};

/**
 * Applies every pending migration of `mode` (owned by default: this service creates the schema); a
 * second run is a no-op. Returns the names it applied. Does not check that the mode fits the
 * database: `migrateSchema` does, and is what the CLI and the worker call.
 */
export async function migrateLatest(knex: Knex, mode: SchemaMode = 'owned'): Promise<string[]> {
  const [, applied] = (await knex.migrate.latest(CONFIGS[mode])) as [number, string[]];
  return applied;
}

/**
 * Names of `mode`'s migrations that `detection` finds unrecorded. Reads nothing more than the
 * catalog did: a dry run (verify) uses it, where `pendingMigrations` would create the bookkeeping
 * table.
 */
export function unappliedMigrations(detection: Pick<SchemaDetection, 'ownedMigrations' | 'kandevModeMigrations'>, mode: SchemaMode): string[] {
  const recorded = new Set(mode === 'owned' ? detection.ownedMigrations : detection.kandevModeMigrations);
  return (mode === 'owned' ? migrations : kandevModeMigrations).map((m) => m.name).filter((name) => !recorded.has(name));
}

/** Names of `mode`'s migrations not yet applied. */
export async function pendingMigrations(knex: Knex, mode: SchemaMode = 'owned'): Promise<string[]> {
  const [, pending] = (await knex.migrate.list(CONFIGS[mode])) as [unknown[], Array<{ file?: string; name?: string } | string>];
  return pending.map((m) => (typeof m === 'string' ? m : (m.name ?? m.file ?? String(m))));
}

export interface SchemaMigration {
  readonly mode: SchemaMode;
  /** Why this mode, for a person. */
  readonly because: string;
  readonly applied: readonly string[];
}

/**
 * Detects who owns the schema, decides the mode under `setting` (throwing SchemaRefusedError for a
 * database it will not touch: some Kandev tables or columns missing, or a forced mode that does not
 * fit), then applies that mode's migrations. Kandev mode creates only this service's own objects.
 * Indexes beside Kandev's tables are never created here (see addMissingIndexes).
 */
export async function migrateSchema(db: { readonly knex: Knex; readonly dialect: SqlDialect }, setting: SchemaModeSetting = 'auto'): Promise<SchemaMigration> {
  const { mode, because } = await resolveSchemaMode(db, setting);
  return { mode, because, applied: await migrateLatest(db.knex, mode) };
}
