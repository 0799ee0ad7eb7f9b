import type { Knex } from 'knex';
import type { SqlDialect } from '../../src/repository/dialect.js';

/**
 * The tables a newer Kandev backend (after it implemented task-owned plan comments) has beside the
 * older snapshot of test/support/kandevSchema.ts: its plan, comment, admission, queue and attachment
 * tables, in Kandev's DDL style (one text for both dialects, `TIMESTAMP`, JSON as TEXT). Written by
 * this project from the column lists of /work/shared/docs/plan-comments-design.md §2, not copied
 * from Kandev. Its `queued_messages` has Kandev's queue columns only: none of this project's
 * receipt columns.
 */
const KANDEV_PLAN_TABLES = [
  `CREATE TABLE IF NOT EXISTS task_plans (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL DEFAULT 'Plan',
    content TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT 'agent',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    implementation_started_at TIMESTAMP NULL,
    implementation_started_session_id TEXT NULL,
    implementation_started_by TEXT NULL,
    comments_revision BIGINT NOT NULL DEFAULT 0,
    FOREIGN KEY (task_id) REFERENCES tasks(id) ON DELETE CASCADE
  )`,
  `CREATE TABLE IF NOT EXISTS task_plan_comments (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    body TEXT NOT NULL,
    selected_text TEXT NOT NULL DEFAULT '',
    anchor_from INTEGER NULL,
    anchor_to INTEGER NULL,
    version BIGINT NOT NULL DEFAULT 1,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    FOREIGN KEY (task_id) REFERENCES tasks(id) ON DELETE CASCADE,
    FOREIGN KEY (plan_id) REFERENCES task_plans(id) ON DELETE CASCADE
  )`,
  `CREATE INDEX IF NOT EXISTS idx_task_plan_comments_task_plan_created ON task_plan_comments(task_id, plan_id, created_at, id)`,
  `CREATE TABLE IF NOT EXISTS task_plan_comment_admissions (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    plan_id TEXT NOT NULL,
    request_fingerprint TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    FOREIGN KEY (task_id) REFERENCES tasks(id) ON DELETE CASCADE
  )`,
  `CREATE TABLE IF NOT EXISTS queued_messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    plan_mode INTEGER NOT NULL DEFAULT 0,
    attachments_json TEXT NOT NULL DEFAULT '[]',
    metadata_json TEXT NOT NULL DEFAULT '{}',
    queued_at TIMESTAMP NOT NULL,
    queued_by TEXT NOT NULL DEFAULT ''
  )`,
  `CREATE INDEX IF NOT EXISTS idx_queued_messages_session_position ON queued_messages(session_id, position)`,
  `CREATE TABLE IF NOT EXISTS queue_session_locks (session_id TEXT PRIMARY KEY)`,
  `CREATE TABLE IF NOT EXISTS queue_session_state (session_id TEXT PRIMARY KEY, auto_run INTEGER NOT NULL DEFAULT 1)`,
  `CREATE TABLE IF NOT EXISTS task_message_attachments (
    id TEXT PRIMARY KEY,
    owner_id TEXT NOT NULL DEFAULT '',
    workspace_id TEXT NOT NULL,
    task_id TEXT NOT NULL DEFAULT '',
    session_id TEXT NOT NULL DEFAULT '',
    message_id TEXT NOT NULL DEFAULT '',
    queue_id TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    mime_type TEXT NOT NULL DEFAULT 'application/octet-stream',
    kind TEXT NOT NULL DEFAULT 'resource',
    delivery_mode TEXT NOT NULL DEFAULT 'prompt',
    size_bytes INTEGER NOT NULL,
    storage_key TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL DEFAULT 'staged',
    expires_at TIMESTAMP NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
  )`,
];

export async function createKandevPlanTables(db: { readonly knex: Knex | Knex.Transaction; readonly dialect: SqlDialect }): Promise<void> {
  for (const statement of KANDEV_PLAN_TABLES) await db.knex.raw(statement);
}
