import type { DialectName, SqlDialect } from '../dialect.js';
import type { ServiceTable } from './serviceTables.js';

/**
 * The indexes the current-turn queries rely on, ONE list per dialect for both schema modes. Owned
 * mode has them from migrations 0001 and 0003; beside Kandev's tables they are added only by
 * `migrate --add-indexes` (a build can take long on a big table, so it is never implicit). The
 * queries run without them, only slower.
 *
 * The names start with `pp_`, which Kandev does not use, so Kandev's `CREATE INDEX IF NOT EXISTS
 * idx_...` can never be satisfied by one of ours, and one of Kandev's can never pass for ours: the
 * inspection (indexInspection.ts) compares each definition as the catalog reports it, not the name.
 *
 * Keep in step with the queries: a planner uses an expression index only while the query's
 * expression is the same text (migrationExpressions.test.ts and requiredIndexes.test.ts check it).
 * A changed definition takes a new name, so an old one reports missing, not "a different index".
 */
export interface RequiredIndex {
  readonly name: string;
  readonly table: ServiceTable;
  /** The queries it serves, for a person reading a report. */
  readonly serves: string;
  /**
   * The index as the dialect's catalog reports it: SQLite's `sqlite_master.sql` (the statement as
   * written) or PostgreSQL's `pg_get_indexdef` without the schema; compared after
   * normalizeIndexDefinition.
   */
  readonly definition: string;
  /** The statement that creates it (PostgreSQL: addMissingIndexes runs it CONCURRENTLY). */
  readonly create: string;
}

const CURRENT_TURN_ORDER = 'the current-turn rule: every LIMIT 1 walk of a session in D1 order, and the window over many sessions';
const PENDING_ID = 'every bundle lookup by metadata.pending_id alone: claim, restore, bundle lock, listing rows';
const TURN_TYPE = "the pending-action statement's per-turn probes by type, and the message-evidence EXISTS of the authority predicate";

const SQLITE_PENDING_ID =
  `(CASE WHEN json_type((CASE WHEN json_valid(metadata) THEN metadata END), '$.pending_id') = 'text' ` +
  `THEN json_extract((CASE WHEN json_valid(metadata) THEN metadata END), '$.pending_id') END)`;

function sqliteIndex(name: string, table: ServiceTable, keys: string, serves: string): RequiredIndex {
  const create = `CREATE INDEX ${name} ON ${table} (${keys})`;
  return { name, table, serves, definition: create, create };
}

const REQUIRED_INDEXES: Readonly<Record<DialectName, readonly RequiredIndex[]>> = {
  sqlite: [
    sqliteIndex(
      'pp_turns_current_turn_order',
      'task_session_turns',
      'task_session_id, (CASE WHEN completed_at IS NULL THEN 0 ELSE 1 END), started_at DESC, created_at DESC, id DESC',
      CURRENT_TURN_ORDER,
    ),
    sqliteIndex('pp_messages_pending_id', 'task_session_messages', SQLITE_PENDING_ID, PENDING_ID),
    sqliteIndex('pp_messages_turn_type', 'task_session_messages', 'turn_id, type', TURN_TYPE),
  ],
  postgres: [
    {
      name: 'pp_turns_current_turn_order',
      table: 'task_session_turns',
      serves: CURRENT_TURN_ORDER,
      definition:
        'CREATE INDEX pp_turns_current_turn_order ON task_session_turns USING btree (task_session_id, ' +
        '( CASE WHEN (completed_at IS NULL) THEN 0 ELSE 1 END), started_at DESC, created_at DESC, id COLLATE "C" DESC)',
      create:
        'CREATE INDEX pp_turns_current_turn_order ON task_session_turns (task_session_id, ' +
        '(CASE WHEN completed_at IS NULL THEN 0 ELSE 1 END), started_at DESC, created_at DESC, id COLLATE "C" DESC)',
    },
    {
      name: 'pp_messages_pending_id',
      table: 'task_session_messages',
      serves: PENDING_ID,
      definition: "CREATE INDEX pp_messages_pending_id ON task_session_messages USING btree (pp_json_string(metadata, '{pending_id}'::text[]))",
      create: "CREATE INDEX pp_messages_pending_id ON task_session_messages (pp_json_string(metadata, '{pending_id}'))",
    },
    {
      name: 'pp_messages_turn_type',
      table: 'task_session_messages',
      serves: TURN_TYPE,
      definition: 'CREATE INDEX pp_messages_turn_type ON task_session_messages USING btree (turn_id, type)',
      create: 'CREATE INDEX pp_messages_turn_type ON task_session_messages (turn_id, type)',
    },
  ],
};

/**
 * Where SQLite timestamps may be in Kandev's text as well as ours, the current-turn order compares
 * the normalised key of each timestamp (`SqlDialect.timestampKey`), and only an index on those same
 * expressions serves it; a new name, since it is a different index.
 */
function sqliteKeyedCurrentTurnOrder(dialect: Pick<SqlDialect, 'timestampKey'>): RequiredIndex {
  return sqliteIndex(
    'pp_turns_current_turn_order_key',
    'task_session_turns',
    `task_session_id, (CASE WHEN completed_at IS NULL THEN 0 ELSE 1 END), ${dialect.timestampKey('started_at')} DESC, ${dialect.timestampKey('created_at')} DESC, id DESC`,
    CURRENT_TURN_ORDER,
  );
}

/** The indexes the queries of this dialect variant (its timestamp forms included) rely on. */
export function requiredIndexes(dialect: Pick<SqlDialect, 'name' | 'timestampForms' | 'timestampKey'>): readonly RequiredIndex[] {
  const list = REQUIRED_INDEXES[dialect.name as DialectName];
  // Only SQLite's text columns can hold two forms: PostgreSQL's timestamps are instants, never mixed.
  if (!dialect.timestampForms.mixed) return list;
  return list.map((index) => (index.name === 'pp_turns_current_turn_order' ? sqliteKeyedCurrentTurnOrder(dialect) : index));
}
