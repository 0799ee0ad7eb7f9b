import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { describeEachDialect, openKandevDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

// The mode comes from each test's flags, never from the environment the suite runs in.
const { SCHEMA_MODE: _ignored, ...ENV } = process.env;

function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...ENV, LOG_LEVEL: 'warn' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

describeEachDialect('pending-projector migrate on %s', (dialect) => {
  // Beside Kandev's SQLite rows the current-turn order reads timestamps through a key, which its own index serves.
  const REQUIRED = [
    dialect === 'sqlite' ? 'pp_turns_current_turn_order_key' : 'pp_turns_current_turn_order',
    'pp_messages_pending_id',
    'pp_messages_turn_type',
  ];
  const opened: TestDatabase[] = [];
  const kandev = async () => {
    const t = await openKandevDatabase(dialect, { file: true });
    opened.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
  });

  it('on a Kandev database: applies only its own objects, names each missing index and the command that adds them; --add-indexes builds them', async () => {
    const t = await kandev();
    const first = await cli(['migrate', '--database-url', t.url]);
    expect(first.stderr).toBe('');
    expect(first.status).toBe(0);
    expect(first.stdout).toMatch(/^schema mode: kandev \(/);
    expect(first.stdout).toMatch(
      /applied kandev_mode_0001_own_objects, kandev_mode_0002_prompt_receipts, kandev_mode_0003_queue_management, kandev_mode_0004_summary_writes to /,
    );
    for (const name of REQUIRED) expect(first.stdout).toMatch(new RegExp(`index ${name} on \\w+: missing`));
    expect(first.stdout).toMatch(/3 of 3 indexes the current-turn queries need are not there/);
    expect(first.stdout).toMatch(/Add them with: pending-projector migrate --add-indexes --database-url /);

    const second = await cli(['migrate', '--database-url', t.url]);
    expect(second.status).toBe(0);
    expect(second.stdout).toMatch(/is up to date/);
    expect(second.stdout).toMatch(/3 of 3 indexes the current-turn queries need are not there/);

    const added = await cli(['migrate', '--add-indexes', '--database-url', t.url]);
    expect(added.status).toBe(0);
    for (const name of REQUIRED) {
      expect(added.stderr).toMatch(new RegExp(`building index ${name} on \\w+: CREATE INDEX ${dialect === 'postgres' ? 'CONCURRENTLY ' : ''}${name} `));
      expect(added.stderr).toMatch(new RegExp(`built index ${name} in `));
    }
    expect(added.stdout).toMatch(/indexes: all 3 the current-turn queries need are present/);

    const after = await cli(['migrate', '--database-url', t.url]);
    expect(after.status).toBe(0);
    expect(after.stdout).toMatch(/is up to date\nindexes: all 3 the current-turn queries need are present\n$/);
  });

  it('--add-indexes exits 1 when a required index is still not there afterwards', async () => {
    const t = await kandev();
    const order = REQUIRED[0]!;
    await t.db.knex.raw(`CREATE INDEX ${order} ON task_session_turns (task_session_id)`);
    const out = await cli(['migrate', '--add-indexes', '--database-url', t.url]);
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(new RegExp(`left index ${order} alone: a different index holds this name`));
    expect(out.stdout).toMatch(new RegExp(`index ${order} on task_session_turns: a different index holds this name`));
    expect(out.stdout).toMatch(/1 of 3 indexes/);
  });

  it('refuses a partial Kandev schema with exit 2, naming what is missing', async () => {
    const t = await kandev();
    await t.db.knex.raw('DROP TABLE task_status_summaries');
    await t.db.knex.raw('ALTER TABLE task_session_messages DROP COLUMN requests_input');
    const out = await cli(['migrate', '--database-url', t.url]);
    expect(out.status).toBe(2);
    expect(out.stdout).toBe('');
    expect(out.stderr).toMatch(/refusing this database: it has some of the Kandev tables the service reads, but not all of them/);
    expect(out.stderr).toMatch(/- missing table task_status_summaries /);
    expect(out.stderr).toMatch(/- missing column task_session_messages\.requests_input\b/);
    expect(out.stderr).toMatch(/\(SCHEMA_REFUSED\)/);
  });

  it("refuses --schema-mode owned on a Kandev database, saying it would create Kandev's tables", async () => {
    const t = await kandev();
    const out = await cli(['migrate', '--schema-mode', 'owned', '--database-url', t.url]);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/migration 0001, which creates Kandev's tables/);
  });

  it('refuses SCHEMA_MODE=kandev on a database this service created, and accepts owned there', async () => {
    const t = await openTestDatabase(dialect, undefined, { file: true });
    opened.push(t);
    const refused = await cli(['migrate', '--schema-mode', 'kandev', '--database-url', t.url]);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/SCHEMA_MODE=kandev, but this service created its tables \(owned mode\)/);
    const owned = await cli(['migrate', '--schema-mode', 'owned', '--database-url', t.url]);
    expect(owned.status).toBe(0);
    expect(owned.stdout).toMatch(/^schema mode: owned \(owned-mode migrations are recorded/);
    expect(owned.stdout).toMatch(/indexes: all 3 the current-turn queries need are present/);
  });
});

describe('pending-projector migrate settings', () => {
  it('rejects an unknown schema mode as a configuration error (exit 2)', async () => {
    const out = await cli(['migrate', '--schema-mode', 'mine', '--database-url', 'sqlite::memory:']);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/SCHEMA_MODE \/ --schema-mode = "mine"/);
  });
});
