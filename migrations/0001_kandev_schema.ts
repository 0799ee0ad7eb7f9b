import type { Knex } from 'knex';

/**
 * Kandev's task, session, turn, message, summary and meta tables (domain reference §1), one
 * migration text for both dialects. Timestamps are PostgreSQL `timestamp` and SQLite TEXT holding
 * the canonical fixed-width UTC form (see src/timestamps.ts). JSON is TEXT '{}' in both.
 *
 * Frozen: databases in service ran this text, so editing what it creates would give a fresh
 * database a schema no existing one has. A change is a new migration. For that reason the index
 * expressions and the pp_json_* helpers below are written out here rather than imported from the
 * repository's dialect: an import would let a later edit of a query silently change what this
 * migration creates. test/integration/migrationExpressions.test.ts reads back what it created on
 * both dialects, pins it, and checks that the queries' own fragments (dialect.ts,
 * currentTurnAuthority.ts, clarificationSql.ts) still match it: the planner serves them from these
 * indexes, and every helper the PostgreSQL fragments call is one created here.
 */

type Dialect = 'sqlite' | 'postgres';

function dialectOf(knex: Knex): Dialect {
  return (knex.client as { dialect?: string }).dialect === 'postgresql' ? 'postgres' : 'sqlite';
}

function timestamp(table: Knex.CreateTableBuilder, dialect: Dialect, name: string): Knex.ColumnBuilder {
  return table.specificType(name, dialect === 'postgres' ? 'timestamp(6)' : 'TEXT');
}

// PostgreSQL has no way to test JSON validity before version 16, so a cast failure is caught once
// here. IMMUTABLE lets the planner fold repeated calls and lets an expression index use them.
// Exported for the Kandev-mode migration, which creates the very same helpers beside Kandev's tables.
export const POSTGRES_JSON_FUNCTIONS = `
CREATE OR REPLACE FUNCTION pp_safe_jsonb(doc text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  IF doc IS NULL THEN RETURN NULL; END IF;
  RETURN doc::jsonb;
EXCEPTION WHEN others THEN
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION pp_json_flag_parsed(doc text, key text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  root jsonb := pp_safe_jsonb(doc);
  v jsonb;
BEGIN
  IF root IS NULL OR jsonb_typeof(root) <> 'object' THEN RETURN false; END IF;
  v := root -> key;
  IF jsonb_typeof(v) = 'number' THEN
    -- Compared as a double, as SQLite and JavaScript do (1.0000000000000001 is 1 there); a value
    -- beyond double range is simply not 1.
    BEGIN
      RETURN (v #>> '{}')::float8 = 1;
    EXCEPTION WHEN others THEN
      RETURN false;
    END;
  END IF;
  RETURN CASE jsonb_typeof(v)
    WHEN 'boolean' THEN v = 'true'::jsonb
    WHEN 'string' THEN (v #>> '{}') IN ('true', '1')
    ELSE false END;
END $$;

-- The flag as every query reads it. A document without a backslash spells each of its keys
-- literally, so when the key's text does not occur in it the key is absent and the flag false:
-- no parse, and no subtransaction for pp_safe_jsonb's EXCEPTION block. Most turns carry no flag,
-- and the windowed current-turn rank evaluates three flags per turn (bench:queries). A one-
-- expression SQL function, so the planner inlines it into the query.
CREATE OR REPLACE FUNCTION pp_json_flag(doc text, key text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN doc IS NULL THEN false
    WHEN strpos(doc, key) = 0 AND strpos(doc, '\\') = 0 THEN false
    ELSE pp_json_flag_parsed(doc, key)
  END
$$;

CREATE OR REPLACE FUNCTION pp_json_string(doc text, path text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  root jsonb := pp_safe_jsonb(doc);
  v jsonb;
BEGIN
  IF root IS NULL OR jsonb_typeof(root) <> 'object' THEN RETURN NULL; END IF;
  v := root #> path;
  IF jsonb_typeof(v) = 'string' THEN RETURN v #>> '{}'; END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION pp_json_string_or_absent(doc text, key text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  root jsonb := pp_safe_jsonb(doc);
  v jsonb;
BEGIN
  IF root IS NULL OR jsonb_typeof(root) <> 'object' THEN RETURN NULL; END IF;
  v := root -> key;
  IF v IS NULL OR jsonb_typeof(v) = 'null' THEN RETURN ''; END IF;
  IF jsonb_typeof(v) = 'string' THEN RETURN v #>> '{}'; END IF;
  RETURN NULL;
END $$;
`;

function pendingIdExpression(dialect: Dialect): string {
  // The planner matches the index only while this is the expression the repository's
  // dialect.jsonString() emits (pinned by test/integration/migrationExpressions.test.ts).
  return dialect === 'postgres'
    ? `pp_json_string(metadata, '{pending_id}')`
    : `(CASE WHEN json_type((CASE WHEN json_valid(metadata) THEN metadata END), '$.pending_id') = 'text' ` +
        `THEN json_extract((CASE WHEN json_valid(metadata) THEN metadata END), '$.pending_id') END)`;
}

export async function up(knex: Knex): Promise<void> {
  const dialect = dialectOf(knex);
  if (dialect === 'postgres') await knex.raw(POSTGRES_JSON_FUNCTIONS);

  await knex.schema.createTable('tasks', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().defaultTo('');
    t.text('workflow_id').notNullable().defaultTo('');
    t.text('workflow_step_id').notNullable().defaultTo('');
    t.text('title').notNullable();
    t.text('description').defaultTo('');
    t.text('state').defaultTo('TODO');
    t.integer('priority').defaultTo(0);
    t.integer('position').defaultTo(0);
    t.text('metadata').defaultTo('{}');
    timestamp(t, dialect, 'archived_at').nullable();
    timestamp(t, dialect, 'created_at').notNullable();
    timestamp(t, dialect, 'updated_at').notNullable();
    t.index(['workspace_id'], 'idx_tasks_workspace_id');
  });

  await knex.schema.createTable('task_sessions', (t) => {
    t.text('id').primary();
    t.text('task_id').notNullable().references('id').inTable('tasks').onDelete('CASCADE');
    t.text('state').notNullable().defaultTo('CREATED');
    t.text('metadata').defaultTo('{}');
    t.text('name').notNullable().defaultTo('');
    t.integer('is_primary').defaultTo(0);
    t.integer('is_passthrough').defaultTo(0);
    timestamp(t, dialect, 'started_at').notNullable();
    timestamp(t, dialect, 'completed_at').nullable();
    timestamp(t, dialect, 'updated_at').notNullable();
    t.index(['task_id'], 'idx_task_sessions_task_id');
    t.index(['state'], 'idx_task_sessions_state');
    t.index(['task_id', 'state'], 'idx_task_sessions_task_state');
  });

  await knex.schema.createTable('task_session_turns', (t) => {
    t.text('id').primary();
    t.text('task_session_id').notNullable().references('id').inTable('task_sessions').onDelete('CASCADE');
    t.text('task_id').notNullable();
    timestamp(t, dialect, 'started_at').notNullable();
    timestamp(t, dialect, 'completed_at').nullable();
    t.text('execution_profile_id').notNullable().defaultTo('');
    t.bigInteger('route_generation').notNullable().defaultTo(0);
    t.text('metadata').defaultTo('{}');
    timestamp(t, dialect, 'created_at').notNullable();
    timestamp(t, dialect, 'updated_at').notNullable();
    t.index(['task_session_id'], 'idx_turns_session_id');
    t.index(['task_session_id', 'started_at'], 'idx_turns_session_started');
    t.index(['task_id'], 'idx_turns_task_id');
  });
  // Serves D1's four-key order per session, so the current turn is the first index entry of the
  // session instead of a sort (the window site ranks many sessions in one pass over it).
  // The id key is compared byte-wise on PostgreSQL too (dialect.binaryText), and the index must say so.
  // The keys must stay currentTurnAuthority's orderBy (pinned by migrationExpressions.test.ts).
  await knex.raw(
    `CREATE INDEX idx_turns_current_turn_order ON task_session_turns (task_session_id, ` +
      `(CASE WHEN completed_at IS NULL THEN 0 ELSE 1 END), started_at DESC, created_at DESC, ` +
      `id${dialect === 'postgres' ? ' COLLATE "C"' : ''} DESC)`,
  );

  await knex.schema.createTable('task_session_messages', (t) => {
    t.text('id').primary();
    t.text('task_session_id').notNullable().references('id').inTable('task_sessions').onDelete('CASCADE');
    t.text('task_id').defaultTo('');
    t.text('turn_id').notNullable().references('id').inTable('task_session_turns').onDelete('CASCADE');
    t.text('author_type').notNullable().defaultTo('user');
    t.text('author_id').defaultTo('');
    t.text('content').notNullable();
    t.integer('requests_input').defaultTo(0);
    t.text('type').notNullable().defaultTo('message');
    t.text('metadata').defaultTo('{}');
    timestamp(t, dialect, 'created_at').notNullable();
    timestamp(t, dialect, 'updated_at').notNullable();
    t.integer('prompt_seq').notNullable().defaultTo(0);
    t.index(['task_session_id'], 'idx_messages_session_id');
    t.index(['created_at'], 'idx_messages_created_at');
    t.index(['task_session_id', 'created_at'], 'idx_messages_session_created');
    t.index(['turn_id', 'type'], 'idx_messages_turn_type');
    t.index(['task_id', 'author_type', 'created_at'], 'idx_messages_task_author_created');
    t.index(['task_session_id', 'updated_at'], 'idx_messages_session_updated');
  });
  await knex.raw(
    `CREATE INDEX idx_messages_metadata_pending_id ON task_session_messages (${pendingIdExpression(dialect)})`,
  );

  await knex.schema.createTable('task_status_summaries', (t) => {
    t.text('task_id').primary().references('id').inTable('tasks').onDelete('CASCADE');
    t.text('workspace_id').notNullable();
    t.bigInteger('revision').notNullable().defaultTo(0);
    t.text('summary').notNullable().defaultTo('{}');
    timestamp(t, dialect, 'updated_at').notNullable();
    t.index(['workspace_id'], 'idx_task_status_summaries_workspace');
  });

  await knex.schema.createTable('kandev_meta', (t) => {
    t.text('key').primary();
    t.text('value').notNullable().defaultTo('');
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'kandev_meta',
    'task_status_summaries',
    'task_session_messages',
    'task_session_turns',
    'task_sessions',
    'tasks',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
  if (dialectOf(knex) === 'postgres') {
    await knex.raw(
      'DROP FUNCTION IF EXISTS pp_json_string_or_absent(text, text), pp_json_string(text, text[]), ' +
        'pp_json_flag(text, text), pp_json_flag_parsed(text, text), pp_safe_jsonb(text)',
    );
  }
}
