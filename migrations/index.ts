import type { Knex } from 'knex';
import * as kandevSchema from './0001_kandev_schema.js';
import * as leases from './0002_pending_projector_leases.js';
import * as indexNames from './0003_pp_index_names.js';

export interface Migration {
  name: string;
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/**
 * Owned mode (this service created the schema): migrations in order. Listed statically so they run
 * the same under tsx, vitest and a build.
 */
export const migrations: readonly Migration[] = [
  { name: '0001_kandev_schema', ...kandevSchema },
  { name: '0002_pending_projector_leases', ...leases },
  { name: '0003_pp_index_names', ...indexNames },
];

