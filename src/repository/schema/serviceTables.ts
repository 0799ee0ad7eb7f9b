/**
 * The Kandev tables this service reads and writes, each with every column a query in
 * src/repository/ names or a row mapping (rowMapping.ts, statusSummaries.ts) reads from `SELECT *`.
 * A database that has all of them is one the worker can run on; a Kandev database lacking one is
 * refused by name (schemaMode.ts) rather than failing later on the first query that needs it.
 * Kandev's other tables and columns are none of the service's business.
 */
export const SERVICE_TABLE_NAMES = ['tasks', 'task_sessions', 'task_session_turns', 'task_session_messages', 'task_status_summaries', 'kandev_meta'] as const;

export type ServiceTable = (typeof SERVICE_TABLE_NAMES)[number];

export const SERVICE_TABLES: Readonly<Record<ServiceTable, readonly string[]>> = {
  tasks: ['id', 'workspace_id', 'title', 'state', 'metadata', 'archived_at', 'created_at', 'updated_at'],
  task_sessions: ['id', 'task_id', 'state', 'metadata', 'is_primary', 'started_at', 'updated_at'],
  task_session_turns: ['id', 'task_session_id', 'task_id', 'started_at', 'completed_at', 'metadata', 'created_at', 'updated_at'],
  task_session_messages: [
    'id',
    'task_session_id',
    'task_id',
    'turn_id',
    'author_type',
    'author_id',
    'content',
    'requests_input',
    'type',
    'metadata',
    'created_at',
    'updated_at',
  ],
  task_status_summaries: ['task_id', 'workspace_id', 'revision', 'summary', 'updated_at'],
  kandev_meta: ['key', 'value'],
};

/** Knex's bookkeeping of this service's migrations (both modes), named so it cannot be Kandev's. */
export const MIGRATIONS_TABLE = 'pending_projector_migrations';
