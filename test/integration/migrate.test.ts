import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateLatest, pendingMigrations } from '../../src/repository/migrate.js';
import { rawRows } from '../../src/repository/context.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

describeEachDialect('migrations on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
  });
  afterAll(async () => {
    await t.close();
  });

  it('applies nothing the second time and leaves nothing pending', async () => {
    expect(await migrateLatest(t.db.knex)).toEqual([]);
    expect(await pendingMigrations(t.db.knex)).toEqual([]);
  });

  it('creates Kandev tables with the indexes the current-turn queries need', async () => {
    const indexes =
      dialect === 'sqlite'
        ? (await rawRows<{ name: string }>(t.ctx, `SELECT name FROM sqlite_master WHERE type = 'index'`)).map((r) => r.name)
        : (await rawRows<{ name: string }>(t.ctx, `SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema()`)).map((r) => r.name);
    expect(indexes).toEqual(
      expect.arrayContaining(['pp_turns_current_turn_order', 'pp_messages_pending_id', 'pp_messages_turn_type', 'idx_task_sessions_task_state']),
    );
    for (const table of ['tasks', 'task_sessions', 'task_session_turns', 'task_session_messages', 'task_status_summaries', 'kandev_meta']) {
      expect(await t.db.knex.schema.hasTable(table)).toBe(true);
    }
  });

  it('reports "up to date" from the CLI when run against a migrated database', () => {
    const out = spawnSync(process.execPath, [CLI, 'migrate', '--database-url', t.url], { encoding: 'utf8', timeout: 60_000 });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/is up to date/);
  });
});

describe('the migrate command', () => {
  it('rejects an unsupported DATABASE_URL with a clear message and exit code', () => {
    const out = spawnSync(process.execPath, [CLI, 'migrate', '--database-url', 'mysql://nope'], { encoding: 'utf8', timeout: 60_000 });
    expect(out.status).not.toBe(0);
    expect(out.stderr).toMatch(/unsupported DATABASE_URL/);
  });
});
