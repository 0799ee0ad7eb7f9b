import type { Knex } from 'knex';

/**
 * This service's own indexes move to names of their own (`pp_`), so a Kandev backend's
 * `CREATE INDEX IF NOT EXISTS idx_messages_metadata_pending_id ...` can never be satisfied by an
 * index of ours with another definition, and one list (src/repository/schema/requiredIndexes.ts)
 * names what the queries need in both schema modes.
 *
 * A rename keeps each definition exactly as 0001 created it: PostgreSQL renames in place; SQLite has
 * no ALTER INDEX, so its index is recreated from its own stored text under the new name. An index
 * 0001 created that is gone (dropped by hand) stays gone: the index report names it as missing.
 * `idx_messages_task_author_created` is dropped, not renamed: no query of this service reads it, and
 * Kandev's index of that name has another key list, so ours could only stand in for Kandev's.
 *
 * Frozen once applied, like 0001 and 0002.
 */

const RENAMES = [
  ['idx_turns_current_turn_order', 'pp_turns_current_turn_order'],
  ['idx_messages_metadata_pending_id', 'pp_messages_pending_id'],
  ['idx_messages_turn_type', 'pp_messages_turn_type'],
] as const;

const DROPPED = 'idx_messages_task_author_created';

function isPostgres(knex: Knex): boolean {
  return (knex.client as { dialect?: string }).dialect === 'postgresql';
}

async function renameSqliteIndex(knex: Knex, from: string, to: string): Promise<void> {
  const rows = (await knex.raw(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?`, [from])) as Array<{ sql: string }>;
  const sql = rows[0]?.sql;
  if (!sql) return;
  // 0001 wrote some names plain and knex's builder wrote others in backticks.
  const head = new RegExp(`^CREATE INDEX [\`"]?${from}[\`"]? `);
  if (!head.test(sql)) throw new Error(`index ${from} is not the one migration 0001 created: ${sql}`);
  await knex.raw(`DROP INDEX ${from}`);
  await knex.raw(sql.replace(head, `CREATE INDEX ${to} `));
}

export async function up(knex: Knex): Promise<void> {
  for (const [from, to] of RENAMES) {
    if (isPostgres(knex)) await knex.raw(`ALTER INDEX IF EXISTS ${from} RENAME TO ${to}`);
    else await renameSqliteIndex(knex, from, to);
  }
  await knex.raw(`DROP INDEX IF EXISTS ${DROPPED}`);
}

export async function down(knex: Knex): Promise<void> {
  for (const [from, to] of RENAMES) {
    if (isPostgres(knex)) await knex.raw(`ALTER INDEX IF EXISTS ${to} RENAME TO ${from}`);
    else await renameSqliteIndex(knex, to, from);
  }
  await knex.raw(`CREATE INDEX IF NOT EXISTS ${DROPPED} ON task_session_messages (task_id, author_type, created_at)`);
}
