import type { Knex } from 'knex';
import type { DialectName, SqlDialect } from '../../src/repository/dialect.js';

/**
 * A database as Kandev's backend leaves it, for the tests of issue #15 ("run beside a real Kandev
 * database"). Written by this project from /work/shared/docs/domain-reference.md §1 (snapshot
 * kdlbs/kandev cd9fa0e603), not copied from Kandev: its table and column names, its TYPES (one DDL
 * text for both dialects, as Kandev runs it: `TIMESTAMP` is a naive timestamp on PostgreSQL and a
 * text-holding column on SQLite; JSON is TEXT), its defaults (`updated_at DEFAULT CURRENT_TIMESTAMP`
 * on messages), its foreign keys with ON DELETE CASCADE, and its own indexes under its own names
 * with its own definitions. It holds NONE of this project's objects: no `pp_*` index or function,
 * no `pending_projector_*` table. Opening it (openKandevDatabase) runs no migration of ours.
 *
 * Where the reference names a column without its type (the review/environment/path columns of
 * `task_sessions`, the columns migrations added to `tasks`), the fixture gives it a nullable or
 * defaulted TEXT/INTEGER type, so that a writer of the service's column set succeeds as it must on
 * Kandev's. Left out, as the reference does not define them: the cost and token counters of
 * `task_sessions`, `idx_messages_prompt_order`, and the queue, plan and attachment tables (§1.7).
 * `idx_messages_task_author_created`'s key list is Kandev's (task_id, author_type, type,
 * created_at DESC), which is not this project's old index of that name.
 */

/** Kandev's message-metadata expression indexes: its JSON helper's text differs by dialect (§1.8). */
function jsonExtract(dialect: DialectName, key: string): string {
  return dialect === 'postgres' ? `(metadata::jsonb->>'${key}')` : `json_extract(metadata, '$.${key}')`;
}

/** The statements, one per element (better-sqlite3 prepares one statement at a time). */
function kandevSchemaStatements(dialect: DialectName): string[] {
  // task_priority_postgres.go converts tasks.priority to TEXT on PostgreSQL; the reference gives
  // no default after the conversion.
  const priority = dialect === 'postgres' ? 'priority TEXT' : 'priority INTEGER DEFAULT 0';
  const binary = dialect === 'postgres' ? 'COLLATE "C"' : 'COLLATE BINARY';
  return [
    `CREATE TABLE IF NOT EXISTS kandev_meta (
      key TEXT PRIMARY KEY,
      value TEXT NOT NULL DEFAULT ''
    )`,
    `CREATE TABLE IF NOT EXISTS tasks (
      id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL DEFAULT '',
      workflow_id TEXT NOT NULL DEFAULT '',
      workflow_step_id TEXT NOT NULL DEFAULT '',
      title TEXT NOT NULL,
      description TEXT DEFAULT '',
      state TEXT DEFAULT 'TODO',
      ${priority},
      position INTEGER DEFAULT 0,
      wip_admitted INTEGER NOT NULL DEFAULT 1,
      queued_for_step_id TEXT NOT NULL DEFAULT '',
      queued_at TIMESTAMP,
      metadata TEXT DEFAULT '{}',
      autopilot_enabled INTEGER NOT NULL DEFAULT 0,
      archived_at TIMESTAMP NULL,
      created_at TIMESTAMP NOT NULL,
      updated_at TIMESTAMP NOT NULL,
      is_ephemeral INTEGER NOT NULL DEFAULT 0,
      parent_id TEXT DEFAULT '',
      origin TEXT DEFAULT 'manual',
      project_id TEXT DEFAULT '',
      labels TEXT DEFAULT '[]',
      identifier TEXT DEFAULT '',
      archived_by_cascade_id TEXT DEFAULT '',
      external_id TEXT ${binary},
      external_id_settled_at TIMESTAMP
    )`,
    `CREATE INDEX IF NOT EXISTS idx_tasks_workspace_id ON tasks(workspace_id)`,
    `CREATE INDEX IF NOT EXISTS idx_tasks_queued_for_step ON tasks(queued_for_step_id, queued_at)`,
    `CREATE UNIQUE INDEX IF NOT EXISTS uniq_tasks_external_id ON tasks(workspace_id, external_id) WHERE external_id IS NOT NULL`,
    `CREATE TABLE IF NOT EXISTS task_sessions (
      id TEXT PRIMARY KEY,
      task_id TEXT NOT NULL,
      state TEXT NOT NULL DEFAULT 'CREATED',
      metadata TEXT DEFAULT '{}',
      started_at TIMESTAMP NOT NULL,
      completed_at TIMESTAMP,
      updated_at TIMESTAMP NOT NULL,
      is_primary INTEGER DEFAULT 0,
      is_passthrough INTEGER DEFAULT 0,
      review_status TEXT DEFAULT '',
      task_environment_id TEXT DEFAULT '',
      execution_profile_id TEXT DEFAULT '',
      route_generation BIGINT NOT NULL DEFAULT 0,
      name TEXT NOT NULL DEFAULT '',
      workspace_path TEXT DEFAULT '',
      last_read_message_id TEXT DEFAULT '',
      FOREIGN KEY (task_id) REFERENCES tasks(id) ON DELETE CASCADE
    )`,
    `CREATE INDEX IF NOT EXISTS idx_task_sessions_task_id ON task_sessions(task_id)`,
    `CREATE INDEX IF NOT EXISTS idx_task_sessions_state ON task_sessions(state)`,
    `CREATE INDEX IF NOT EXISTS idx_task_sessions_task_state ON task_sessions(task_id, state)`,
    `CREATE TABLE IF NOT EXISTS task_session_turns (
      id TEXT PRIMARY KEY,
      task_session_id TEXT NOT NULL,
      task_id TEXT NOT NULL,
      started_at TIMESTAMP NOT NULL,
      completed_at TIMESTAMP NULL,
      metadata TEXT DEFAULT '{}',
      created_at TIMESTAMP NOT NULL,
      updated_at TIMESTAMP NOT NULL,
      execution_profile_id TEXT NOT NULL DEFAULT '',
      route_generation BIGINT NOT NULL DEFAULT 0,
      FOREIGN KEY (task_session_id) REFERENCES task_sessions(id) ON DELETE CASCADE
    )`,
    `CREATE INDEX IF NOT EXISTS idx_turns_session_id ON task_session_turns(task_session_id)`,
    `CREATE INDEX IF NOT EXISTS idx_turns_session_started ON task_session_turns(task_session_id, started_at)`,
    `CREATE INDEX IF NOT EXISTS idx_turns_task_id ON task_session_turns(task_id)`,
    `CREATE TABLE IF NOT EXISTS task_session_messages (
      id TEXT PRIMARY KEY,
      task_session_id TEXT NOT NULL,
      task_id TEXT DEFAULT '',
      turn_id TEXT NOT NULL,
      author_type TEXT NOT NULL DEFAULT 'user',
      author_id TEXT DEFAULT '',
      content TEXT NOT NULL,
      requests_input INTEGER DEFAULT 0,
      type TEXT NOT NULL DEFAULT 'message',
      metadata TEXT DEFAULT '{}',
      created_at TIMESTAMP NOT NULL,
      updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
      prompt_seq INTEGER NOT NULL DEFAULT 0,
      FOREIGN KEY (task_session_id) REFERENCES task_sessions(id) ON DELETE CASCADE,
      FOREIGN KEY (turn_id) REFERENCES task_session_turns(id) ON DELETE CASCADE
    )`,
    `CREATE INDEX IF NOT EXISTS idx_messages_session_id ON task_session_messages(task_session_id)`,
    `CREATE INDEX IF NOT EXISTS idx_messages_created_at ON task_session_messages(created_at)`,
    `CREATE INDEX IF NOT EXISTS idx_messages_session_created ON task_session_messages(task_session_id, created_at)`,
    `CREATE INDEX IF NOT EXISTS idx_messages_turn_id ON task_session_messages(turn_id)`,
    `CREATE INDEX IF NOT EXISTS idx_messages_task_author_created ON task_session_messages(task_id, author_type, type, created_at DESC)`,
    `CREATE INDEX IF NOT EXISTS idx_messages_session_updated ON task_session_messages(task_session_id, updated_at)`,
    `CREATE INDEX IF NOT EXISTS idx_messages_metadata_tool_call_id ON task_session_messages(task_session_id, ${jsonExtract(dialect, 'tool_call_id')})`,
    `CREATE INDEX IF NOT EXISTS idx_messages_metadata_pending_id ON task_session_messages(task_session_id, ${jsonExtract(dialect, 'pending_id')})`,
    `CREATE TABLE IF NOT EXISTS task_session_prompt_seq (
      task_session_id TEXT PRIMARY KEY,
      last_seq INTEGER NOT NULL DEFAULT 0
    )`,
    `CREATE TABLE IF NOT EXISTS task_status_summaries (
      task_id TEXT PRIMARY KEY,
      workspace_id TEXT NOT NULL,
      revision INTEGER NOT NULL DEFAULT 0,
      summary TEXT NOT NULL DEFAULT '{}',
      updated_at TIMESTAMP NOT NULL,
      FOREIGN KEY (task_id) REFERENCES tasks(id) ON DELETE CASCADE
    )`,
    `CREATE INDEX IF NOT EXISTS idx_task_status_summaries_workspace ON task_status_summaries(workspace_id)`,
  ];
}

/** Creates the Kandev-shaped schema on `db` (a Database or a RepositoryContext), in one transaction. */
export async function createKandevSchema(db: { readonly knex: Knex | Knex.Transaction; readonly dialect: SqlDialect }): Promise<void> {
  const statements = kandevSchemaStatements(db.dialect.name);
  await db.knex.transaction(async (trx) => {
    for (const statement of statements) await trx.raw(statement);
  });
}
