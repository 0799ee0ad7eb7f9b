import type { Knex } from 'knex';

/**
 * Owned mode: what a manageable queue needs beyond migration 0004.
 * - `queued_messages.version`: an entry's edit counter, so `queue.update` is a compare-and-set;
 * - `pending_projector_queue_revisions`: one counter per session, moved by every change of its
 *   waiting set or order, so `queue.reorder` is a compare-and-set over the whole order;
 * - `pending_projector_prompt_outcomes`: what became of a receipt that left without delivery
 *   (removed by a user, cancelled by the service, with its reason), so a replay of the original
 *   request keeps its answer after the row is gone.
 * The two tables are this service's own (Kandev has no such records), the same in both modes.
 *
 * Frozen once applied: the tables are written out here, not imported.
 */
export async function up(knex: Knex): Promise<void> {
  const pg = (knex.client as { dialect?: string }).dialect === 'postgresql';
  await knex.schema.alterTable('queued_messages', (t) => {
    t.integer('version').notNullable().defaultTo(1);
  });
  await knex.schema.createTable('pending_projector_queue_revisions', (t) => {
    t.text('session_id').primary();
    t.bigInteger('revision').notNullable().defaultTo(0);
  });
  await knex.schema.createTable('pending_projector_prompt_outcomes', (t) => {
    t.text('id').primary();
    t.text('session_id').notNullable();
    t.text('task_id').notNullable();
    t.text('delivery_kind').notNullable();
    t.text('status').notNullable();
    t.text('reason').notNullable().defaultTo('');
    t.text('request_fingerprint').notNullable().defaultTo('');
    t.text('detail_json').notNullable().defaultTo('{}');
    t.specificType('settled_at', pg ? 'timestamp(6)' : 'TEXT').notNullable();
    t.index(['task_id'], 'pending_projector_prompt_outcomes_task');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('pending_projector_prompt_outcomes');
  await knex.schema.dropTableIfExists('pending_projector_queue_revisions');
  await knex.schema.alterTable('queued_messages', (t) => {
    t.dropColumn('version');
  });
}
