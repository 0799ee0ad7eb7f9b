import type { Knex } from 'knex';
import { POSTGRES_JSON_FUNCTIONS } from './0001_kandev_schema.js';

/**
 * The first migration of Kandev mode: a database whose Kandev tables Kandev's backend created and
 * owns. It creates only this service's own objects, under names Kandev does not use: the lease
 * table (as 0002 creates it in owned mode) and, on PostgreSQL, the `pp_*` JSON helpers (the very
 * text 0001 runs, so both modes read metadata alike). It never creates, alters or drops a Kandev
 * table, column or index; the indexes the queries want are added by `migrate --add-indexes` only.
 *
 * Frozen once applied.
 */
export async function up(knex: Knex): Promise<void> {
  const postgres = (knex.client as { dialect?: string }).dialect === 'postgresql';
  if (postgres) await knex.raw(POSTGRES_JSON_FUNCTIONS);
  await knex.schema.createTable('pending_projector_leases', (t) => {
    t.text('name').primary();
    t.text('owner').notNullable();
    t.specificType('expires_at', postgres ? 'timestamp(6)' : 'TEXT').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('pending_projector_leases');
  if ((knex.client as { dialect?: string }).dialect === 'postgresql') {
    await knex.raw(
      'DROP FUNCTION IF EXISTS pp_json_string_or_absent(text, text), pp_json_string(text, text[]), ' +
        'pp_json_flag(text, text), pp_json_flag_parsed(text, text), pp_safe_jsonb(text)',
    );
  }
}
