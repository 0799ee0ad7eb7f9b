import type { Knex } from 'knex';

/**
 * Kandev mode: this service's own table of durable prompt receipts, `pending_projector_prompt_receipts`.
 *
 * In owned mode a receipt is a `queued_messages` row carrying this project's receipt columns
 * (migration 0004). Beside Kandev's tables the service never alters Kandev's `queued_messages`, and
 * must not put a direct prompt's receipt there either: Kandev's own queue drain would take the row
 * and deliver it a second time. So the receipts live here, with exactly the columns 0004 gives
 * `queued_messages` (Kandev's queue columns and the receipt columns), so that every receipt
 * statement is one text over either table name. Its id is the caller id, as in owned mode, which
 * is also the id of the transcript message.
 *
 * Kandev's plan, comment, admission and attachment tables are NOT created here: Kandev's backend
 * owns them. Where they are missing, the features that need them reply `unavailable`, naming them.
 *
 * Frozen once applied.
 */
export async function up(knex: Knex): Promise<void> {
  const pg = (knex.client as { dialect?: string }).dialect === 'postgresql';
  const ts = (t: Knex.CreateTableBuilder, name: string) => t.specificType(name, pg ? 'timestamp(6)' : 'TEXT');
  await knex.schema.createTable('pending_projector_prompt_receipts', (t) => {
    t.text('id').primary();
    t.text('session_id').notNullable();
    t.text('task_id').notNullable();
    t.integer('position').notNullable();
    t.text('content').notNullable().defaultTo('');
    t.text('model').notNullable().defaultTo('');
    t.integer('plan_mode').notNullable().defaultTo(0);
    t.text('attachments_json').notNullable().defaultTo('[]');
    t.text('metadata_json').notNullable().defaultTo('{}');
    ts(t, 'queued_at').notNullable();
    t.text('queued_by').notNullable().defaultTo('');
    t.text('delivery_kind').notNullable().defaultTo('queued');
    t.text('delivery_reservation_token').nullable();
    t.text('delivery_reservation_owner').nullable();
    ts(t, 'delivery_reservation_expires_at').nullable();
    ts(t, 'delivery_attempted_at').nullable();
    t.integer('delivery_attempts').notNullable().defaultTo(0);
    ts(t, 'next_attempt_at').nullable();
    t.text('last_error').notNullable().defaultTo('');
    t.text('durable_transcript_message_id').nullable();
    t.text('durable_transcript_turn_id').nullable();
    t.index(['session_id', 'position'], 'pending_projector_prompt_receipts_session_position');
    t.index(['delivery_attempted_at', 'delivery_reservation_expires_at'], 'pending_projector_prompt_receipts_delivery');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('pending_projector_prompt_receipts');
}
