import type { Knex } from 'knex';
import { migrations } from '../../migrations/index.js';

class StaticMigrationSource implements Knex.MigrationSource<(typeof migrations)[number]> {
  async getMigrations() {
    return [...migrations];
  }
  getMigrationName(migration: (typeof migrations)[number]) {
    return migration.name;
  }
  async getMigration(migration: (typeof migrations)[number]) {
    return migration;
  }
}

const config: Knex.MigratorConfig = {
  migrationSource: new StaticMigrationSource(),
  tableName: 'pending_projector_migrations',
};

/** Applies every pending migration; a second run is a no-op. Returns the names it applied. */
export async function migrateLatest(knex: Knex): Promise<string[]> {
  const [, applied] = (await knex.migrate.latest(config)) as [number, string[]];
  return applied;
}

/** Names of migrations not yet applied. */
export async function pendingMigrations(knex: Knex): Promise<string[]> {
  const [, pending] = (await knex.migrate.list(config)) as [unknown[], Array<{ file?: string; name?: string } | string>];
  return pending.map((m) => (typeof m === 'string' ? m : (m.name ?? m.file ?? String(m))));
}
