import type { Knex } from 'knex';

/**
 * Owned mode: the tables of task-owned plan comments and durable prompt receipts (seed 004, ADR
 * 0002), under Kandev's names and with Kandev's columns, so a database this service created looks
 * like one Kandev's backend created after it implemented the ADR:
 * - `task_plans`: one plan per task, with `comments_revision`, the collection's revision;
 * - `task_plan_comments`: the pending comments of the task's plan, each with a `version`;
 * - `task_plan_comment_admissions`: the ledger of every comment id ever admitted (by a create or a
 *   legacy import), so a replayed create never brings back a consumed comment;
 * - `queued_messages`: Kandev's queue columns, plus this project's receipt columns (delivery kind,
 *   reservation token and expiry, the delivery-attempted marker, the retry state and the linked
 *   transcript), as columns because every fenced write and the reconciliation scan compare them;
 * - `queue_session_locks`, `queue_session_state`: Kandev's per-session queue mutex row and auto-run flag;
 * - `task_session_prompt_seq`: the per-session counter behind `task_session_messages.prompt_seq`
 *   (the column itself is 0001's);
 * - `task_message_attachments`: attachment metadata, `staged` until a prompt claims it (`claimed`),
 *   or `expired` / `deleted`. Kandev's FK to `workspaces` is left out: that table does not exist here.
 *
 * Kandev mode never runs this: beside Kandev's tables the service creates none of them
 * (kandev_mode_0002_prompt_receipts creates its own receipt table instead; see docs/schema.md).
 *
 * Frozen once applied, like 0001-0003: the timestamp helper is written out here, not imported.
 */

function isPostgres(knex: Knex): boolean {
  return (knex.client as { dialect?: string }).dialect === 'postgresql';
}

function timestamp(table: Knex.CreateTableBuilder, postgres: boolean, name: string): Knex.ColumnBuilder {
  return table.specificType(name, postgres ? 'timestamp(6)' : 'TEXT');
}

export async function up(knex: Knex): Promise<void> {
  const pg = isPostgres(knex);

  await knex.schema.createTable('task_plans', (t) => {
    t.text('id').primary();
    t.text('task_id').notNullable().unique().references('id').inTable('tasks').onDelete('CASCADE');
    t.text('title').notNullable().defaultTo('Plan');
    t.text('content').notNullable().defaultTo('');
    t.text('created_by').notNullable().defaultTo('agent');
    timestamp(t, pg, 'created_at').notNullable();
    timestamp(t, pg, 'updated_at').notNullable();
    timestamp(t, pg, 'implementation_started_at').nullable();
    t.text('implementation_started_session_id').nullable();
    t.text('implementation_started_by').nullable();
    t.bigInteger('comments_revision').notNullable().defaultTo(0);
  });

  await knex.schema.createTable('task_plan_comments', (t) => {
    t.text('id').primary();
    t.text('task_id').notNullable().references('id').inTable('tasks').onDelete('CASCADE');
    t.text('plan_id').notNullable().references('id').inTable('task_plans').onDelete('CASCADE');
    t.text('body').notNullable();
    t.text('selected_text').notNullable().defaultTo('');
    t.integer('anchor_from').nullable();
    t.integer('anchor_to').nullable();
    t.bigInteger('version').notNullable().defaultTo(1);
    timestamp(t, pg, 'created_at').notNullable();
    timestamp(t, pg, 'updated_at').notNullable();
    // The collection read: one plan's comments in (created_at, id) order.
    t.index(['task_id', 'plan_id', 'created_at', 'id'], 'idx_task_plan_comments_task_plan_created');
  });

  await knex.schema.createTable('task_plan_comment_admissions', (t) => {
    t.text('id').primary();
    t.text('task_id').notNullable().references('id').inTable('tasks').onDelete('CASCADE');
    // No FK: the ledger outlives the plan, so a create replayed after plan.delete stays a replay.
    t.text('plan_id').notNullable();
    t.text('request_fingerprint').notNullable();
    timestamp(t, pg, 'created_at').notNullable();
  });

  await knex.schema.createTable('queued_messages', (t) => {
    t.text('id').primary();
    t.text('session_id').notNullable();
    t.text('task_id').notNullable();
    t.integer('position').notNullable();
    t.text('content').notNullable().defaultTo('');
    t.text('model').notNullable().defaultTo('');
    t.integer('plan_mode').notNullable().defaultTo(0);
    t.text('attachments_json').notNullable().defaultTo('[]');
    t.text('metadata_json').notNullable().defaultTo('{}');
    timestamp(t, pg, 'queued_at').notNullable();
    t.text('queued_by').notNullable().defaultTo('');
    // This project's receipt columns.
    t.text('delivery_kind').notNullable().defaultTo('queued');
    t.text('delivery_reservation_token').nullable();
    t.text('delivery_reservation_owner').nullable();
    timestamp(t, pg, 'delivery_reservation_expires_at').nullable();
    timestamp(t, pg, 'delivery_attempted_at').nullable();
    t.integer('delivery_attempts').notNullable().defaultTo(0);
    timestamp(t, pg, 'next_attempt_at').nullable();
    t.text('last_error').notNullable().defaultTo('');
    t.text('durable_transcript_message_id').nullable();
    t.text('durable_transcript_turn_id').nullable();
    t.index(['session_id', 'position'], 'idx_queued_messages_session_position');
    t.index(['task_id', 'queued_by', 'queued_at'], 'idx_queued_messages_task_activity');
    t.index(['delivery_attempted_at', 'delivery_reservation_expires_at'], 'idx_queued_messages_delivery');
  });

  await knex.schema.createTable('queue_session_locks', (t) => {
    t.text('session_id').primary();
  });

  await knex.schema.createTable('queue_session_state', (t) => {
    t.text('session_id').primary();
    t.integer('auto_run').notNullable().defaultTo(1);
  });

  await knex.schema.createTable('task_session_prompt_seq', (t) => {
    t.text('task_session_id').primary();
    t.integer('last_seq').notNullable().defaultTo(0);
  });

  await knex.schema.createTable('task_message_attachments', (t) => {
    t.text('id').primary();
    t.text('owner_id').notNullable().defaultTo('');
    t.text('workspace_id').notNullable();
    t.text('task_id').notNullable().defaultTo('');
    t.text('session_id').notNullable().defaultTo('');
    t.text('message_id').notNullable().defaultTo('');
    t.text('queue_id').notNullable().defaultTo('');
    t.text('name').notNullable().defaultTo('');
    t.text('mime_type').notNullable().defaultTo('application/octet-stream');
    t.text('kind').notNullable().defaultTo('resource');
    t.text('delivery_mode').notNullable().defaultTo('prompt');
    t.integer('size_bytes').notNullable();
    t.text('storage_key').notNullable().unique();
    t.text('state').notNullable().defaultTo('staged');
    timestamp(t, pg, 'expires_at').notNullable();
    timestamp(t, pg, 'created_at').notNullable();
    timestamp(t, pg, 'updated_at').notNullable();
    t.index(['owner_id', 'state', 'expires_at'], 'idx_task_message_attachments_owner_state');
    t.index(['workspace_id', 'task_id', 'session_id', 'state'], 'idx_task_message_attachments_scope');
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'task_message_attachments',
    'task_session_prompt_seq',
    'queue_session_state',
    'queue_session_locks',
    'queued_messages',
    'task_plan_comment_admissions',
    'task_plan_comments',
    'task_plans',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
