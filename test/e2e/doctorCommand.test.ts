import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { kandevModeMigrations } from '../../migrations/index.js';
import { databaseContents } from '../support/databaseContents.js';
import { describeEachDialect, openKandevDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { KANDEV_TIME, writeMessage, writeSession, writeTask, writeTurn } from '../support/rowsAsWritten.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

const CLI = fileURLToPath(new URL('../../bin/pending-projector.js', import.meta.url));

// The mode and the database come from each test's flags, never from the environment the suite runs in.
const { SCHEMA_MODE: _mode, DATABASE_URL: _url, ...ENV } = process.env;

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

const CANONICAL_TIME = '2026-03-04T05:06:07.500000000Z';

describeEachDialect('pending-projector doctor on %s', (dialect) => {
  const OWNED_REQUIRED = ['pp_turns_current_turn_order', 'pp_messages_pending_id', 'pp_messages_turn_type'];
  // Beside Kandev's SQLite rows the worker orders timestamps through a key, which its own index serves.
  const KANDEV_REQUIRED = [
    dialect === 'sqlite' ? 'pp_turns_current_turn_order_key' : 'pp_turns_current_turn_order',
    'pp_messages_pending_id',
    'pp_messages_turn_type',
  ];
  const opened: TestDatabase[] = [];
  const track = async (open: Promise<TestDatabase>) => {
    const t = await open;
    opened.push(t);
    return t;
  };
  const owned = () => track(openTestDatabase(dialect, undefined, { file: true }));
  const kandev = () => track(openKandevDatabase(dialect, { file: true }));
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
  });

  /** Runs doctor on `t`, asserting it changed nothing: no object created, altered or dropped, no row written. */
  async function doctor(t: TestDatabase, ...flags: string[]) {
    const before = await databaseContents(t);
    const out = await cli(['doctor', '--database-url', t.url, ...flags]);
    expect(await databaseContents(t)).toEqual(before);
    return out;
  }

  it('exits 0 on a clean database this service created and wrote, every index present', async () => {
    const t = await owned();
    const { sessionId } = await seedSession(t.ctx);
    const turnId = await seedTurnAt(t.ctx, sessionId, { startedAt: CANONICAL_TIME });
    await seedClarificationBundle(t.ctx, { sessionId, turnId });
    const out = await doctor(t);
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^database: .* \(\w+\)\nschema mode: owned \(owned-mode migrations are recorded/);
    expect(out.stdout).toMatch(/  every migration of this mode is applied\n/);
    for (const name of OWNED_REQUIRED) expect(out.stdout).toMatch(new RegExp(`index ${name} on \\w+: present`));
    expect(out.stdout).toMatch(/open turns: no session has more than one open turn/);
    expect(out.stdout).not.toMatch(/warnings:/);
    expect(out.stdout).toMatch(/\nverdict: the worker can run \(schema mode owned\)\n$/);
  });

  it("exits 1 beside Kandev's tables without this service's indexes, naming each and the command that adds them", async () => {
    const t = await kandev();
    const out = await doctor(t);
    expect(out.status).toBe(1);
    expect(out.stdout).toMatch(/schema mode: kandev \(Kandev's tables exist/);
    expect(out.stdout).toMatch(/migrations the worker applies at start \(or pending-projector migrate\): kandev_mode_0001_own_objects/);
    expect(out.stdout).toMatch(new RegExp(`    started_at +${dialect === 'sqlite' ? 'TIMESTAMP' : 'timestamp without time zone'}\\n`));
    for (const name of KANDEV_REQUIRED) expect(out.stdout).toMatch(new RegExp(`  index ${name} on \\w+: missing \\(serves `));
    expect(out.stdout).toMatch(
      /  3 of 3 are not there: the queries work without them, only slower\.\n  Add them with: pending-projector migrate --add-indexes --database-url '/,
    );
    expect(out.stdout).toMatch(/- \[indexes\] 3 of 3 indexes the current-turn queries need are not there/);
    expect(out.stdout).toMatch(/verdict: the worker can run \(schema mode kandev\), with 1 warning\n$/);
  });

  it('exits 2 on a partial Kandev schema, naming the missing table and column', async () => {
    const t = await kandev();
    await t.db.knex.raw('DROP TABLE task_status_summaries');
    await t.db.knex.raw('ALTER TABLE task_session_messages DROP COLUMN requests_input');
    const out = await doctor(t);
    expect(out.status).toBe(2);
    expect(out.stdout).toMatch(
      /schema mode: refused \(SCHEMA_MODE=auto\): it has some of the Kandev tables the service reads, but not all of them\n  - missing table task_status_summaries /,
    );
    expect(out.stdout).toMatch(/  - missing column task_session_messages\.requests_input\n/);
    expect(out.stdout).toMatch(/  task_status_summaries: MISSING\n/);
    expect(out.stdout).toMatch(/    requests_input +MISSING\n/);
    expect(out.stdout).toMatch(/verdict: the worker cannot run on this database: it has some of the Kandev tables the service reads, but not all of them\n$/);
  });

  it('exits 1 on metadata that is not valid JSON, with counts per table and the note that it reads as no keys', async () => {
    const t = await owned();
    const taskId = await writeTask(t, { metadata: 'not json', createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
    const sessionId = await writeSession(t, taskId, { metadata: '', startedAt: CANONICAL_TIME });
    const turnId = await writeTurn(t, sessionId, { startedAt: CANONICAL_TIME, metadata: '{"lifecycle_only": true' });
    await writeTurn(t, sessionId, { startedAt: CANONICAL_TIME, completedAt: CANONICAL_TIME, metadata: '[1]' });
    await writeMessage(t, turnId, { createdAt: CANONICAL_TIME, metadata: '{"pending_id": ' });
    await writeMessage(t, turnId, { createdAt: CANONICAL_TIME, metadata: null });
    const out = await doctor(t);
    expect(out.status).toBe(1);
    expect(out.stdout).toMatch(/  tasks: 1 row: 1 not valid JSON \(e\.g\. /);
    expect(out.stdout).toMatch(/  task_sessions: 1 row: 1 not valid JSON \(e\.g\. /);
    expect(out.stdout).toMatch(/  task_session_turns: 2 rows: 1 not valid JSON, 1 JSON but not an object \(e\.g\. /);
    expect(out.stdout).toMatch(/  task_session_messages: 2 rows: 1 not valid JSON, 1 NULL \(e\.g\. /);
    expect(out.stdout.match(/- \[metadata\] .*the service reads such metadata as "no keys"/g)).toHaveLength(4);
    expect(out.stdout).toMatch(/verdict: the worker can run \(schema mode owned\), with 4 warnings\n$/);
  });

  it('exits 1 when a session has two open turns, naming it', async () => {
    const t = await owned();
    const taskId = await writeTask(t, { createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
    const sessionId = await writeSession(t, taskId, { startedAt: CANONICAL_TIME });
    await writeTurn(t, sessionId, { startedAt: CANONICAL_TIME });
    await writeTurn(t, sessionId, { startedAt: '2026-03-04T05:06:08.000000000Z', metadata: '{"prompt_dispatch_pending": true}' });
    await writeTurn(t, sessionId, { startedAt: CANONICAL_TIME, completedAt: CANONICAL_TIME, metadata: '{"lifecycle_only": "1"}' });
    const out = await doctor(t);
    expect(out.status).toBe(1);
    expect(out.stdout).toContain(`open turns: 1 session has more than one open turn: ${sessionId} (2)\n`);
    expect(out.stdout).toContain('turn markers: lifecycle_only 1, prompt_dispatch_pending 1, prompt_dispatch_attempted 0\n');
    expect(out.stdout).toMatch(/- \[open_turns\] 1 session has more than one open turn/);
    expect(out.stdout).toMatch(/with 1 warning\n$/);
  });

  it(
    dialect === 'sqlite'
      ? 'exits 1 on a column holding several timestamp forms, with counts per form'
      : 'says PostgreSQL timestamp columns hold instants, whatever text wrote them, and exits 0',
    async () => {
      const t = await owned();
      const taskId = await writeTask(t, { createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
      const sessionId = await writeSession(t, taskId, { startedAt: CANONICAL_TIME });
      for (const startedAt of [CANONICAL_TIME, KANDEV_TIME, '2026-03-04 05:06:09']) {
        await writeTurn(t, sessionId, { startedAt, createdAt: CANONICAL_TIME, completedAt: CANONICAL_TIME });
      }
      const out = await doctor(t, '--sample', '10');
      if (dialect === 'postgres') {
        expect(out.status).toBe(0);
        expect(out.stdout).toContain('timestamp forms: PostgreSQL timestamp columns hold instants, not text, so there is no form to sample:\n');
        expect(out.stdout).toContain('  task_session_turns.started_at: timestamp(6) without time zone, holds instants (no text form to sample)\n');
        return;
      }
      expect(out.status).toBe(1);
      expect(out.stdout).toContain('timestamp forms, newest 10 rows of each column by rowid;');
      expect(out.stdout).toContain('  task_session_turns.started_at: 3 rows: canonical 1, kandev 1, sqlite_current_timestamp 1  MIXED\n');
      expect(out.stdout).toContain('  task_session_turns.created_at: 3 rows: canonical 3\n');
      expect(out.stdout).toMatch(
        /- \[timestamps\] task_session_turns\.started_at holds more than one timestamp form \(newest 3 rows: canonical 1, kandev 1, sqlite_current_timestamp 1\)/,
      );
      // The Kandev-form row makes the worker read through the timestamp key, whose index is asked for too.
      expect(out.stdout).toMatch(/- \[indexes\] 1 of 3 indexes .*pp_turns_current_turn_order_key missing/);
      expect(out.stdout).toMatch(/with 2 warnings\n$/);
    },
  );

  it('--json: one document carrying the same findings and verdict, with the same exit code', async () => {
    const t = await kandev();
    // Kandev's expression indexes on message metadata refuse malformed metadata on insert (their JSON extract raises).
    await t.db.knex.raw('DROP INDEX idx_messages_metadata_pending_id');
    await t.db.knex.raw('DROP INDEX idx_messages_metadata_tool_call_id');
    const taskId = await writeTask(t);
    const sessionId = await writeSession(t, taskId);
    const first = await writeTurn(t, sessionId, { metadata: '{"lifecycle_only": true}', completedAt: KANDEV_TIME });
    await writeTurn(t, sessionId, { startedAt: '2026-03-04 05:06:08+00:00' });
    await writeTurn(t, sessionId, { startedAt: '2026-03-04T05:06:09.000000000Z' });
    const bad = await writeMessage(t, first, { metadata: 'oops' });
    const text = await doctor(t);
    const json = await doctor(t, '--json');
    expect(json.status).toBe(1);
    expect(text.status).toBe(1);
    const doc = JSON.parse(json.stdout) as Record<string, any>;
    expect(doc).toMatchObject({
      database: expect.stringMatching(dialect === 'sqlite' ? /^sqlite:/ : /^postgres:/),
      dialect,
      reachable: true,
      schema: {
        setting: 'auto',
        shape: 'kandev',
        mode: 'kandev',
        refused: null,
        pending_migrations: kandevModeMigrations.map((m) => m.name),
        missing_tables: [],
        missing_columns: [],
      },
      indexes: { created_by_migrations: false, add_indexes_command: expect.stringMatching(/^pending-projector migrate --add-indexes --database-url '/) },
      open_turns: { sessions: 1, examples: [{ session_id: sessionId, open_turns: 2 }] },
      turn_markers: { lifecycle_only: 1, prompt_dispatch_pending: 0, prompt_dispatch_attempted: 0 },
      problems: [],
      verdict: { exit_code: 1, status: 'warnings' },
    });
    expect(doc.schema.tables).toHaveLength(6);
    expect(doc.indexes.required.map((i: { name: string; state: string }) => [i.name, i.state])).toEqual(KANDEV_REQUIRED.map((name) => [name, 'missing']));
    expect(doc.metadata.find((m: { table: string }) => m.table === 'task_session_messages')).toEqual({
      table: 'task_session_messages',
      scanned: true,
      rows: 1,
      nulls: 0,
      malformed: 1,
      not_object: 0,
      example_ids: [bad],
    });
    const startedAt = doc.timestamps.columns.find((c: { table: string; column: string }) => c.table === 'task_session_turns' && c.column === 'started_at');
    expect(startedAt).toEqual(
      dialect === 'sqlite'
        ? {
            table: 'task_session_turns',
            column: 'started_at',
            kind: 'sampled',
            type: 'TIMESTAMP',
            rows: 3,
            nulls: 0,
            forms: { canonical: 1, kandev: 2, sqlite_current_timestamp: 0, other: 0 },
            other_examples: [],
          }
        : {
            table: 'task_session_turns',
            column: 'started_at',
            kind: 'native',
            type: 'timestamp without time zone',
            rows: null,
            nulls: null,
            forms: null,
            other_examples: [],
          },
    );
    expect(doc.timestamps.sample_rows).toBe(1000);
    // On SQLite the turns' started_at, created_at and updated_at each hold Kandev's and the canonical form.
    const mixed = dialect === 'sqlite' ? ['started_at', 'created_at', 'updated_at'] : [];
    expect(doc.warnings.map((w: { check: string; message: string }) => (w.check === 'timestamps' ? w.message.split(' ')[0] : w.check))).toEqual([
      'indexes',
      ...mixed.map((name) => `task_session_turns.${name}`),
      'metadata',
      'open_turns',
    ]);
    // The text report lists the very same warnings and verdict.
    for (const warning of doc.warnings as Array<{ check: string; message: string }>)
      expect(text.stdout).toContain(`  - [${warning.check}] ${warning.message}\n`);
    expect(text.stdout).toContain(`verdict: ${doc.verdict.summary}\n`);
  });
});

describe('pending-projector doctor, database not there', () => {
  it('exits 3 (unreachable) on a PostgreSQL URL nobody answers, naming DATABASE_URL and the URL without its password', async () => {
    const url = 'postgres://doctor:hunter2-secret@127.0.0.1:1/nowhere';
    const text = await cli(['doctor', '--database-url', url]);
    expect(text.status).toBe(3);
    expect(text.stderr).toMatch(
      /cannot reach the database at postgres:\/\/doctor:\[REDACTED\]@127\.0\.0\.1:1\/nowhere \(DATABASE_URL \/ --database-url\): .*ECONNREFUSED/,
    );
    expect(text.stdout).toMatch(/verdict: the worker cannot run: the database cannot be reached or read\n$/);
    const json = await cli(['doctor', '--database-url', url, '--json']);
    expect(json.status).toBe(3);
    const doc = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(doc).toMatchObject({ reachable: false, schema: null, verdict: { exit_code: 3, status: 'cannot_run' } });
    for (const out of [text.stdout, text.stderr, json.stdout, json.stderr]) expect(out).not.toContain('hunter2');
  });

  it('exits 2 on a SQLite path with no database, and does not create one', async () => {
    const file = path.join(os.tmpdir(), `doctor-none-${process.pid}.db`);
    const out = await cli(['doctor', '--database-url', `sqlite:${file}`]);
    expect(out.status).toBe(2);
    // Said once, on the report's "cannot run:" line, naming the setting.
    const said = `DATABASE_URL sqlite:${file}: no such file`;
    expect(out.stdout.split(said).length - 1 + out.stderr.split(said).length - 1).toBe(1);
    expect(fs.existsSync(file)).toBe(false);
  });

  it('refuses a --sample that is not a whole number of rows (exit 2)', async () => {
    const out = await cli(['doctor', '--database-url', 'sqlite::memory:', '--sample', 'lots']);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/--sample "lots": give a whole number of rows from 1 to 1000000/);
  });
});
