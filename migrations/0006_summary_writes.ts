import type { Knex } from 'knex';

/**
 * Owned mode: `pending_projector_summary_writes`, one row per task this service has written a
 * summary for: the revision it last wrote and the owned fields (`pending_action`,
 * `queued_prompt_count`) it wrote there, written in the compare-and-set's transaction; and the last
 * revision it found written by another writer with owned fields changed, which `doctor` reports.
 * It sits beside `task_status_summaries` rather than in it, because Kandev compares the stored
 * summary text and its table is Kandev's (ADR 0018).
 *
 * Frozen once applied: the table is written out here, not imported.
 */
export async function up(knex: Knex): Promise<void> {
  const pg = (knex.client as { dialect?: string }).dialect === 'postgresql';
  await knex.schema.createTable('pending_projector_summary_writes', (t) => {
    t.text('task_id').primary();
    t.bigInteger('revision').notNullable();
    t.text('owned_fields').notNullable();
    t.specificType('written_at', pg ? 'timestamp(6)' : 'TEXT').notNullable();
    t.bigInteger('foreign_revision').nullable();
    t.text('foreign_fields').nullable();
    t.specificType('foreign_seen_at', pg ? 'timestamp(6)' : 'TEXT').nullable();
    t.bigInteger('foreign_count').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('pending_projector_summary_writes');
}
