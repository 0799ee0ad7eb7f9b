import type { Knex } from 'knex';
import * as kandevSchema from './0001_kandev_schema.js';
import * as leases from './0002_pending_projector_leases.js';

/** Migrations in order. Listed statically so they run the same under tsx, vitest and a build. */
export const migrations: ReadonlyArray<{ name: string; up(knex: Knex): Promise<void>; down(knex: Knex): Promise<void> }> = [
  { name: '0001_kandev_schema', ...kandevSchema },
  { name: '0002_pending_projector_leases', ...leases },
];
