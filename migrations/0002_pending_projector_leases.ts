import type { Knex } from 'knex';

/** This service's own table (not Kandev's): time-bounded leases so one replica runs boot reconcile. */
export async function up(knex: Knex): Promise<void> {
  const postgres = (knex.client as { dialect?: string }).dialect === 'postgresql';
  await knex.schema.createTable('pending_projector_leases', (t) => {
    t.text('name').primary();
    t.text('owner').notNullable();
    t.specificType('expires_at', postgres ? 'timestamp(6)' : 'TEXT').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('pending_projector_leases');
}
