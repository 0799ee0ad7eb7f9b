import type { Knex } from 'knex';
import * as kandevSchema from './0001_kandev_schema.js';
import * as leases from './0002_pending_projector_leases.js';
import * as indexNames from './0003_pp_index_names.js';
import * as planComments from './0004_task_plan_comments_and_prompt_receipts.js';
import * as queueManagement from './0005_queue_management.js';
import * as summaryWrites from './0006_summary_writes.js';
import * as kandevModeOwnObjects from './kandev_mode_0001_own_objects.js';
import * as kandevModePromptReceipts from './kandev_mode_0002_prompt_receipts.js';
import * as kandevModeQueueManagement from './kandev_mode_0003_queue_management.js';
import * as kandevModeSummaryWrites from './kandev_mode_0004_summary_writes.js';

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
  { name: '0004_task_plan_comments_and_prompt_receipts', ...planComments },
  { name: '0005_queue_management', ...queueManagement },
  { name: '0006_summary_writes', ...summaryWrites },
];

/**
 * Kandev mode (Kandev's backend created its tables): only this service's own objects. Recorded in
 * the same bookkeeping table under names no owned migration has, so the mode a database was
 * migrated in can be read back from it.
 */
export const kandevModeMigrations: readonly Migration[] = [
  { name: 'kandev_mode_0001_own_objects', ...kandevModeOwnObjects },
  { name: 'kandev_mode_0002_prompt_receipts', ...kandevModePromptReceipts },
  { name: 'kandev_mode_0003_queue_management', ...kandevModeQueueManagement },
  { name: 'kandev_mode_0004_summary_writes', ...kandevModeSummaryWrites },
];
