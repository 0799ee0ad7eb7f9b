import { afterEach, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { kandevModeMigrations, migrations } from '../../migrations/index.js';
import { storesOf } from '../../src/bin/assembly.js';
import { judgeInspection } from '../../src/bin/doctorVerdict.js';
import { createDatabase, SqliteFileMissingError } from '../../src/repository/database.js';
import { migrateSchema } from '../../src/repository/migrate.js';
import { addMissingIndexes } from '../../src/repository/schema/addIndexes.js';
import { inspectDatabase, type DatabaseInspection } from '../../src/repository/doctor/inspectDatabase.js';
import type { TimestampColumnFinding } from '../../src/repository/doctor/timestampTextForms.js';
import type { SchemaModeSetting } from '../../src/repository/schema/schemaMode.js';
import { databaseContents } from '../support/databaseContents.js';
import { describeEachDialect, openEmptyDatabase, openKandevDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { KANDEV_TIME, writeMessage, writeSession, writeTask, writeTurn } from '../support/rowsAsWritten.js';

const CANONICAL_TIME = '2026-03-04T05:06:07.500000000Z';

describeEachDialect('doctor inspection on %s', (dialect) => {
  const opened: TestDatabase[] = [];
  const track = async (open: Promise<TestDatabase>) => {
    const t = await open;
    opened.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
  });

  /** Inspects `t`, asserting that it wrote nothing. */
  async function inspect(t: TestDatabase, options: { schemaMode?: SchemaModeSetting; sampleRows?: number } = {}): Promise<DatabaseInspection> {
    const before = await databaseContents(t);
    const inspection = await inspectDatabase(t.db, { schemaMode: options.schemaMode ?? 'auto', sampleRows: options.sampleRows ?? 1000 });
    expect(await databaseContents(t)).toEqual(before);
    return inspection;
  }

  const column = (inspection: DatabaseInspection, table: string, name: string): TimestampColumnFinding =>
    inspection.timestamps.find((f) => f.table === table && f.column === name)!;

  it('finds nothing to warn about on a database this service created and wrote', async () => {
    const t = await track(openTestDatabase(dialect));
    const taskId = await writeTask(t, { createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
    const sessionId = await writeSession(t, taskId, { startedAt: CANONICAL_TIME });
    await writeTurn(t, sessionId, { startedAt: CANONICAL_TIME, metadata: null });
    const inspection = await inspect(t);
    expect(inspection.decision).toMatchObject({ ok: true, mode: 'owned' });
    expect(inspection.pendingMigrations).toEqual([]);
    expect(inspection.indexes.map((i) => i.state)).toEqual(['present', 'present', 'present']);
    expect(inspection.metadata.tables.find((x) => x.table === 'task_session_turns')).toMatchObject({ rows: 1, nulls: 1, malformed: 0, notObject: 0 });
    expect(inspection.openTurns).toEqual({ sessions: 0, examples: [] });
    expect(judgeInspection(inspection)).toMatchObject({ exitCode: 0, status: 'ok', problems: [], warnings: [] });
  });

  it('on an empty database: owned mode, whose migrations create the tables and indexes, and no warning', async () => {
    const t = await track(openEmptyDatabase(dialect));
    const inspection = await inspect(t);
    expect(inspection.detection.shape).toBe('empty');
    expect(inspection.decision).toMatchObject({ ok: true, mode: 'owned' });
    expect(inspection.pendingMigrations).toEqual(migrations.map((m) => m.name));
    expect(inspection.metadata.tables.every((x) => !x.scanned)).toBe(true);
    expect(inspection.openTurns).toBeNull();
    expect(judgeInspection(inspection).exitCode).toBe(0);
  });

  it("beside Kandev's tables: kandev mode, every table and column with its catalog type, each required index missing", async () => {
    const t = await track(openKandevDatabase(dialect));
    const inspection = await inspect(t);
    expect(inspection.decision).toMatchObject({ ok: true, mode: 'kandev' });
    expect(inspection.pendingMigrations).toEqual(kandevModeMigrations.map((m) => m.name));
    const turns = inspection.detection.tables.find((x) => x.table === 'task_session_turns')!;
    expect(turns.columns.find((c) => c.name === 'started_at')).toEqual({
      name: 'started_at',
      present: true,
      type: dialect === 'sqlite' ? 'TIMESTAMP' : 'timestamp without time zone',
    });
    // Beside Kandev's SQLite rows the worker orders timestamps through a key: its own index serves that.
    const order = dialect === 'sqlite' ? 'pp_turns_current_turn_order_key' : 'pp_turns_current_turn_order';
    expect(inspection.indexes.map((i) => [i.index.name, i.state])).toEqual([
      [order, 'missing'],
      ['pp_messages_pending_id', 'missing'],
      ['pp_messages_turn_type', 'missing'],
    ]);
    const verdict = judgeInspection(inspection, 'pending-projector migrate --add-indexes --database-url X');
    expect(verdict.exitCode).toBe(1);
    expect(verdict.warnings).toEqual([
      {
        check: 'indexes',
        message: expect.stringMatching(
          new RegExp(
            `^3 of 3 indexes .* \\(${order} missing, pp_messages_pending_id missing, pp_messages_turn_type missing\\).*add them with: pending-projector migrate --add-indexes --database-url X$`,
          ),
        ),
      },
    ]);

    // Once migrated and given the indexes, nothing is pending and nothing is missing.
    await migrateSchema(t.db);
    // Through the stores' dialect, as `migrate --add-indexes` does: which indexes serve depends on the timestamp forms.
    await addMissingIndexes(await storesOf(t.db, { kandevSchema: true }));
    const after = await inspect(t);
    expect(after.decision).toMatchObject({ ok: true, mode: 'kandev' });
    expect(after.pendingMigrations).toEqual([]);
    expect(judgeInspection(after)).toMatchObject({ exitCode: 0, warnings: [] });
  });

  it('refuses a partial Kandev schema, naming the missing table and column, and still reads what is there', async () => {
    const t = await track(openKandevDatabase(dialect));
    await t.db.knex.raw('DROP TABLE task_status_summaries');
    await t.db.knex.raw('ALTER TABLE task_session_turns DROP COLUMN completed_at');
    const taskId = await writeTask(t, { metadata: 'not json' });
    const inspection = await inspect(t);
    expect(inspection.decision.ok).toBe(false);
    expect(inspection.detection.missingTables).toEqual(['task_status_summaries']);
    expect(inspection.detection.missingColumns).toEqual(['task_session_turns.completed_at']);
    expect(column(inspection, 'task_status_summaries', 'updated_at').kind).toBe('absent');
    expect(column(inspection, 'task_session_turns', 'completed_at').kind).toBe('absent');
    expect(inspection.openTurns).toBeNull();
    expect(inspection.metadata.tables.find((x) => x.table === 'tasks')).toMatchObject({ malformed: 1, exampleIds: [taskId] });
    const verdict = judgeInspection(inspection);
    expect(verdict.exitCode).toBe(2);
    expect(verdict.problems.map((p) => p.message)).toEqual([
      'refused: it has some of the Kandev tables the service reads, but not all of them',
      expect.stringMatching(/^missing table task_status_summaries /),
      'missing column task_session_turns.completed_at',
    ]);
  });

  it('counts, per table, the metadata the service reads as no keys, with example ids', async () => {
    const t = await track(openKandevDatabase(dialect));
    // Kandev's expression index on messages refuses malformed metadata on insert (its JSON extract raises).
    await t.db.knex.raw('DROP INDEX idx_messages_metadata_pending_id');
    await t.db.knex.raw('DROP INDEX idx_messages_metadata_tool_call_id');
    const badTask = await writeTask(t, { metadata: '' });
    await writeTask(t, { metadata: null });
    const sessionId = await writeSession(t, badTask, { metadata: '{"open": ' });
    const arrayTurn = await writeTurn(t, sessionId, { metadata: '[{"lifecycle_only": true}]', completedAt: KANDEV_TIME });
    const stringTurn = await writeTurn(t, sessionId, { metadata: '"x"', completedAt: KANDEV_TIME });
    const turnId = await writeTurn(t, sessionId, { metadata: 'not json', completedAt: KANDEV_TIME });
    const badMessage = await writeMessage(t, turnId, { metadata: '{"pending_id": "p1"' });
    await writeMessage(t, turnId, { metadata: '{"pending_id": "p2"}' });
    const inspection = await inspect(t);
    const byTable = Object.fromEntries(inspection.metadata.tables.map((x) => [x.table, x]));
    expect(byTable.tasks).toEqual({ table: 'tasks', scanned: true, rows: 2, nulls: 1, malformed: 1, notObject: 0, exampleIds: [badTask] });
    expect(byTable.task_sessions).toMatchObject({ rows: 1, malformed: 1, notObject: 0, exampleIds: [sessionId] });
    expect(byTable.task_session_turns).toMatchObject({ rows: 3, malformed: 1, notObject: 2 });
    expect([...byTable.task_session_turns!.exampleIds].sort()).toEqual([arrayTurn, stringTurn, turnId].sort());
    expect(byTable.task_session_messages).toMatchObject({ rows: 2, malformed: 1, notObject: 0, exampleIds: [badMessage] });
    // A lifecycle marker inside an array is no marker: the document has no keys.
    expect(inspection.metadata.markers?.lifecycleOnly).toBe(0);
    const verdict = judgeInspection(inspection);
    expect(verdict.exitCode).toBe(1);
    const metadataWarnings = verdict.warnings.filter((w) => w.check === 'metadata');
    expect(metadataWarnings.map((w) => w.message.split(':')[0])).toEqual(['tasks', 'task_sessions', 'task_session_turns', 'task_session_messages']);
    expect(metadataWarnings.every((w) => w.message.includes('the service reads such metadata as "no keys"'))).toBe(true);
    expect(metadataWarnings[2]!.message).toMatch(
      /^task_session_turns: 1 row whose metadata is not valid JSON and 2 rows whose metadata is JSON but not an object /,
    );
  });

  it(`reads a \\u0000 escape as ${dialect === 'postgres' ? 'malformed, as jsonb refuses it' : 'a JSON object, as SQLite reads it'}`, async () => {
    const t = await track(openTestDatabase(dialect));
    await writeTask(t, { metadata: '{"note": "\\u0000"}', createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
    const tasks = (await inspect(t)).metadata.tables.find((x) => x.table === 'tasks')!;
    expect(tasks).toMatchObject(dialect === 'postgres' ? { malformed: 1, notObject: 0 } : { malformed: 0, notObject: 0 });
  });

  it('finds sessions with more than one open turn, the most first, and the turn markers the current-turn rule reads', async () => {
    const t = await track(openTestDatabase(dialect));
    const taskId = await writeTask(t, { createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
    const two = await writeSession(t, taskId, { id: 'session-two', startedAt: CANONICAL_TIME });
    const three = await writeSession(t, taskId, { id: 'session-three', startedAt: CANONICAL_TIME });
    const one = await writeSession(t, taskId, { id: 'session-one', startedAt: CANONICAL_TIME });
    const turn = (sessionId: string, metadata: string, completed = false) =>
      writeTurn(t, sessionId, { startedAt: CANONICAL_TIME, metadata, completedAt: completed ? CANONICAL_TIME : null });
    await turn(two, '{}');
    await turn(two, '{"prompt_dispatch_pending": true}');
    await turn(three, '{"prompt_dispatch_pending": "1", "prompt_dispatch_attempted": 1}');
    await turn(three, '{"prompt_dispatch_attempted": "true"}');
    await turn(three, '{"prompt_dispatch_attempted": "yes"}');
    await turn(one, '{}');
    for (const marker of ['true', '1', '"true"', '"1"']) await turn(one, `{"lifecycle_only": ${marker}}`, true);
    for (const notMarker of ['false', '0', '"yes"', '{}', 'null']) await turn(one, `{"lifecycle_only": ${notMarker}}`, true);
    const inspection = await inspect(t);
    expect(inspection.openTurns).toEqual({
      sessions: 2,
      examples: [
        { sessionId: three, openTurns: 3 },
        { sessionId: two, openTurns: 2 },
      ],
    });
    expect(inspection.metadata.markers).toEqual({ lifecycleOnly: 4, promptDispatchPending: 2, promptDispatchAttempted: 2 });
    const verdict = judgeInspection(inspection);
    expect(verdict.exitCode).toBe(1);
    expect(verdict.warnings).toEqual([
      {
        check: 'open_turns',
        message: expect.stringMatching(/^2 sessions have more than one open turn \(completed_at IS NULL\), e\.g\. session-three \(3\), session-two \(2\): /),
      },
    ]);
  });

  it(
    dialect === 'sqlite'
      ? 'counts the timestamp forms of the newest rows of each column, and warns of a column holding more than one'
      : 'reports PostgreSQL timestamp columns as instants, with no text form to sample or warn of',
    async () => {
      const t = await track(openTestDatabase(dialect));
      const taskId = await writeTask(t, { createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
      const sessionId = await writeSession(t, taskId, { startedAt: CANONICAL_TIME });
      const starts = [
        '2026-03-04T05:06:07.500000000Z',
        '2026-03-04 05:06:08+00:00',
        '2026-03-04 05:06:08.25+00:00',
        '2026-03-04 05:06:09',
        '2026-03-04T05:06:10.000000000Z',
      ];
      for (const startedAt of starts) await writeTurn(t, sessionId, { startedAt, createdAt: CANONICAL_TIME, completedAt: CANONICAL_TIME });
      const inspection = await inspect(t);
      const startedAt = column(inspection, 'task_session_turns', 'started_at');
      const createdAt = column(inspection, 'task_session_turns', 'created_at');
      if (dialect === 'postgres') {
        expect(inspection.timestamps.every((f) => f.kind === 'native')).toBe(true);
        expect(startedAt).toEqual({ table: 'task_session_turns', column: 'started_at', kind: 'native', type: 'timestamp(6) without time zone' });
        expect(judgeInspection(inspection).exitCode).toBe(0);
        return;
      }
      expect(startedAt).toEqual({
        table: 'task_session_turns',
        column: 'started_at',
        kind: 'sampled',
        type: 'TEXT',
        rows: 5,
        nulls: 0,
        forms: { canonical: 2, kandev: 2, sqlite_current_timestamp: 1, other: 0 },
        otherExamples: [],
      });
      expect(createdAt).toMatchObject({ kind: 'sampled', rows: 5, forms: { canonical: 5, kandev: 0, sqlite_current_timestamp: 0, other: 0 } });
      const verdict = judgeInspection(inspection);
      expect(verdict.exitCode).toBe(1);
      // Kandev-form rows in this database make the worker read through the timestamp key, so the
      // index over the keys is asked for too.
      expect(verdict.warnings).toEqual([
        { check: 'indexes', message: expect.stringMatching(/^1 of 3 indexes .* \(pp_turns_current_turn_order_key missing\)/) },
        {
          check: 'timestamps',
          message: expect.stringMatching(
            /^task_session_turns\.started_at holds more than one timestamp form \(newest 5 rows: canonical 2, kandev 2, sqlite_current_timestamp 1\); .*is not time order; the worker sees the mix when it starts and orders these values by their instant/,
          ),
        },
      ]);

      // Only the newest rows count: the last two written are SQLite's CURRENT_TIMESTAMP form and a canonical one.
      const newest = column(await inspect(t, { sampleRows: 2 }), 'task_session_turns', 'started_at');
      expect(newest).toMatchObject({ rows: 2, forms: { canonical: 1, kandev: 0, sqlite_current_timestamp: 1, other: 0 } });
    },
  );

  it('samples a timestamp column held as text, and names the values in no known form', async () => {
    const t = await track(openTestDatabase(dialect));
    if (dialect === 'postgres') await t.db.knex.raw('ALTER TABLE tasks ALTER COLUMN archived_at TYPE text');
    await writeTask(t, { createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
    await t.db.knex('tasks').update({ archived_at: 'yesterday' });
    await writeTask(t, { createdAt: CANONICAL_TIME, updatedAt: CANONICAL_TIME });
    const inspection = await inspect(t);
    const archivedAt = column(inspection, 'tasks', 'archived_at');
    expect(archivedAt).toMatchObject({
      kind: 'sampled',
      rows: 2,
      nulls: 1,
      forms: { canonical: 0, kandev: 0, sqlite_current_timestamp: 0, other: 1 },
      otherExamples: ['yesterday'],
    });
    expect(judgeInspection(inspection).warnings).toEqual([
      {
        check: 'timestamps',
        message: '1 sampled value of tasks.archived_at in none of the known forms ("yesterday"): how they order against other values is not known',
      },
    ]);
  });

  it("classifies Kandev's CURRENT_TIMESTAMP default beside its Go driver's text as two forms", async () => {
    const t = await track(openKandevDatabase(dialect));
    const taskId = await writeTask(t);
    const sessionId = await writeSession(t, taskId);
    const turnId = await writeTurn(t, sessionId, { completedAt: KANDEV_TIME });
    await writeMessage(t, turnId);
    // Kandev's column default fills updated_at when a writer leaves it out.
    const session = await t.db.knex('task_sessions').select('task_id').where({ id: sessionId }).first();
    await t.db
      .knex('task_session_messages')
      .insert({ id: 'defaulted', task_session_id: sessionId, task_id: session.task_id, turn_id: turnId, content: 'x', created_at: KANDEV_TIME });
    const inspection = await inspect(t);
    const updatedAt = column(inspection, 'task_session_messages', 'updated_at');
    if (dialect === 'postgres') {
      expect(updatedAt).toMatchObject({ kind: 'native', type: 'timestamp without time zone' });
      expect(judgeInspection(inspection).warnings.map((w) => w.check)).toEqual(['indexes']);
      return;
    }
    expect(updatedAt).toMatchObject({ kind: 'sampled', rows: 2, forms: { canonical: 0, kandev: 1, sqlite_current_timestamp: 1, other: 0 } });
    expect(judgeInspection(inspection).warnings.filter((w) => w.check === 'timestamps')).toEqual([
      {
        check: 'timestamps',
        message: expect.stringMatching(
          /^task_session_messages\.updated_at holds more than one timestamp form \(newest 2 rows: kandev 1, sqlite_current_timestamp 1\); both forms are space-separated, so their text order follows time order, but /,
        ),
      },
    ]);
  });

  it('a read-only pool reads, refuses every write, and creates no SQLite file', async () => {
    const t = await track(openKandevDatabase(dialect, { file: true }));
    const taskId = await writeTask(t);
    const readOnly = createDatabase(t.url, { readOnly: true, searchPath: t.searchPath });
    try {
      expect(await readOnly.knex('tasks').pluck('id')).toEqual([taskId]);
      await expect(readOnly.knex('tasks').insert({ id: 'another', title: 'x', created_at: KANDEV_TIME, updated_at: KANDEV_TIME })).rejects.toThrow(
        dialect === 'sqlite' ? /readonly database/ : /read-only transaction/,
      );
      await expect(readOnly.knex.raw('CREATE TABLE doctor_probe (id TEXT)')).rejects.toThrow();
    } finally {
      await readOnly.destroy();
    }
    expect(await t.db.knex('tasks').pluck('id')).toEqual([taskId]);
    if (dialect === 'sqlite') {
      const missing = path.join(os.tmpdir(), `doctor-missing-${process.pid}.db`);
      // Refused before any connection is made, so nothing is created on the way.
      expect(() => createDatabase(`sqlite:${missing}`, { readOnly: true })).toThrow(SqliteFileMissingError);
      expect(fs.existsSync(missing)).toBe(false);
    }
  });
});
