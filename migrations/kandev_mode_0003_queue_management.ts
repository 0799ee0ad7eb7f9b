import type { Knex } from 'knex';

/**
 * Kandev mode: what owned mode's 0005 adds, on this service's own objects only. The entry version
 * goes on our receipt table (never on Kandev's `queued_messages`); the revision and outcome tables
 * are ours in both modes.
 *
 * Frozen once applied.
 */
export async function up(knex: Knex): Promise<void> {
  const pg = (knex.client as { dialect?: string }).dialect === 'postgresql';
  await knex.schema.alterTable('pending_projector_prompt_receipts', (t) => {
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
  await knex.schema.alterTable('pending_projector_prompt_receipts', (t) => {
    t.dropColumn('version');
  });
}
