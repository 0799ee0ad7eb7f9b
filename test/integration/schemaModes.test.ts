import { afterEach, describe, expect, it } from 'vitest';
import { POSTGRES_JSON_FUNCTIONS } from '../../migrations/0001_kandev_schema.js';
import { postgresDialect, sqliteDialect, withTimestampForms } from '../../src/repository/dialect.js';
import { ERROR_CODES } from '../../src/errors.js';
import { migrateSchema, pendingMigrations } from '../../src/repository/migrate.js';
import { addMissingIndexes, type IndexBuildEvent } from '../../src/repository/schema/addIndexes.js';
import { inspectRequiredIndexes } from '../../src/repository/schema/indexInspection.js';
import { requiredIndexes } from '../../src/repository/schema/requiredIndexes.js';
import { decideSchemaMode, detectSchema, SchemaRefusedError, type SchemaModeSetting } from '../../src/repository/schema/schemaMode.js';
import { SERVICE_TABLES, SERVICE_TABLE_NAMES } from '../../src/repository/schema/serviceTables.js';
import { catalogChanges, catalogSnapshot } from '../support/catalog.js';
import { describeEachDialect, isAvailable, openEmptyDatabase, openKandevDatabase, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';

// This service's own objects, by name: the only things migrate may add beside Kandev's tables.
// sqlite_sequence is SQLite's bookkeeping of AUTOINCREMENT, which knex's migrations table uses.
const OURS = /^[a-z]+:(pp_|pending_projector_|sqlite_autoindex_pending_projector_)|^table:sqlite_sequence$/;

const REQUIRED_NAMES = ['pp_turns_current_turn_order', 'pp_messages_pending_id', 'pp_messages_turn_type'];

/** The refusal `run` throws, or a failed assertion if it resolves. */
async function refusal(run: () => Promise<unknown>): Promise<SchemaRefusedError> {
  const error = await run().then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(SchemaRefusedError);
  expect((error as SchemaRefusedError).code).toBe(ERROR_CODES.SCHEMA_REFUSED);
  return error as SchemaRefusedError;
}

async function statesOf(t: TestDatabase) {
  return Object.fromEntries((await inspectRequiredIndexes(t.db)).map((inspection) => [inspection.index.name, inspection.state]));
}

describeEachDialect('schema ownership modes on %s', (dialect) => {
  const opened: TestDatabase[] = [];
  const open = async (database: Promise<TestDatabase>) => {
    const t = await database;
    opened.push(t);
    return t;
  };
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
  });

  it("detects Kandev's tables with every column the service reads, and decides kandev mode", async () => {
    const t = await open(openKandevDatabase(dialect));
    const detection = await detectSchema(t.db);
    expect(detection.shape).toBe('kandev');
    expect(detection.missingTables).toEqual([]);
    expect(detection.missingColumns).toEqual([]);
    expect(detection.tables.map((table) => table.table)).toEqual(SERVICE_TABLE_NAMES);
    const turns = detection.tables.find((table) => table.table === 'task_session_turns')!;
    expect(turns.columns.map((column) => column.name)).toEqual(SERVICE_TABLES.task_session_turns);
    expect(turns.columns.find((column) => column.name === 'started_at')?.type).toBe(dialect === 'postgres' ? 'timestamp without time zone' : 'TIMESTAMP');
    expect(decideSchemaMode(detection, 'auto')).toMatchObject({ ok: true, mode: 'kandev' });
  });

  it("migrates a Kandev database without touching a Kandev table, column or index, creating only this service's objects", async () => {
    const t = await open(openKandevDatabase(dialect));
    const before = await catalogSnapshot(t);
    const outcome = await migrateSchema(t.db);
    expect(outcome).toMatchObject({
      mode: 'kandev',
      applied: ['kandev_mode_0001_own_objects', 'kandev_mode_0002_prompt_receipts', 'kandev_mode_0003_queue_management', 'kandev_mode_0004_summary_writes'],
    });
    const after = await catalogSnapshot(t);
    const changes = catalogChanges(before, after);
    expect(changes.changed).toEqual([]);
    expect(changes.removed).toEqual([]);
    expect(changes.added.filter((key) => !OURS.test(key))).toEqual([]);
    expect(changes.added).toEqual(
      expect.arrayContaining([dialect === 'sqlite' ? 'table:pending_projector_leases' : 'column:pending_projector_leases.expires_at']),
    );
    // No index of ours: building them is `migrate --add-indexes`, never implicit.
    expect(changes.added.filter((key) => /^index:pp_/.test(key))).toEqual([]);
    expect(await pendingMigrations(t.db.knex, 'kandev')).toEqual([]);
  });

  it('applies nothing and changes nothing the second time', async () => {
    const t = await open(openKandevDatabase(dialect));
    await migrateSchema(t.db);
    const once = await catalogSnapshot(t);
    expect(await migrateSchema(t.db)).toMatchObject({ mode: 'kandev', applied: [] });
    expect(catalogChanges(once, await catalogSnapshot(t))).toEqual({ added: [], changed: [], removed: [] });
  });

  it("reports every required index missing beside Kandev's, whose same-named index does not count", async () => {
    const t = await open(openKandevDatabase(dialect));
    await migrateSchema(t.db);
    expect(await statesOf(t)).toEqual(Object.fromEntries(REQUIRED_NAMES.map((name) => [name, 'missing'])));
  });

  it("adds exactly the missing indexes, after which the report is clean and Kandev's indexes are as they were", async () => {
    const t = await open(openKandevDatabase(dialect));
    await migrateSchema(t.db);
    const before = await catalogSnapshot(t);
    const events: IndexBuildEvent[] = [];
    const outcome = await addMissingIndexes(t.db, (event) => events.push(event));
    expect(outcome.failed).toEqual([]);
    expect(outcome.created).toEqual(REQUIRED_NAMES);
    expect(events.filter((e) => e.kind === 'built').map((e) => e.index.name)).toEqual(REQUIRED_NAMES);
    if (dialect === 'postgres') {
      expect(events.filter((e) => e.kind === 'building').every((e) => e.kind === 'building' && e.statement.startsWith('CREATE INDEX CONCURRENTLY '))).toBe(
        true,
      );
    }
    expect(outcome.after.map((inspection) => inspection.state)).toEqual(['present', 'present', 'present']);
    const changes = catalogChanges(before, await catalogSnapshot(t));
    expect(changes).toEqual({ added: REQUIRED_NAMES.map((name) => `index:${name}`).sort(), changed: [], removed: [] });
    // Run again: nothing to do.
    expect(await addMissingIndexes(t.db)).toMatchObject({ created: [], failed: [] });
  });

  it('leaves an index of another definition under a required name alone, and keeps reporting it', async () => {
    const t = await open(openKandevDatabase(dialect));
    await migrateSchema(t.db);
    await t.db.knex.raw('CREATE INDEX pp_messages_turn_type ON task_session_messages (turn_id)');
    const inspection = (await inspectRequiredIndexes(t.db)).find((i) => i.index.name === 'pp_messages_turn_type')!;
    expect(inspection.state).toBe('different');
    expect(inspection.found).toMatch(/\(turn_id\)/);
    const events: IndexBuildEvent[] = [];
    const outcome = await addMissingIndexes(t.db, (event) => events.push(event));
    expect(events.filter((e) => e.kind === 'left-alone').map((e) => e.index.name)).toEqual(['pp_messages_turn_type']);
    expect(outcome.created).toEqual(['pp_turns_current_turn_order', 'pp_messages_pending_id']);
    expect(await statesOf(t)).toMatchObject({ pp_messages_turn_type: 'different' });
  });

  it('refuses a database missing one of the Kandev tables the service reads, naming it', async () => {
    const t = await open(openKandevDatabase(dialect));
    await t.db.knex.raw('DROP TABLE task_status_summaries');
    const before = await catalogSnapshot(t);
    const error = await refusal(() => migrateSchema(t.db));
    expect(error.problems).toEqual([expect.stringMatching(/^missing table task_status_summaries\b/)]);
    expect(error.message).toMatch(/some of the Kandev tables the service reads, but not all of them/);
    expect(catalogChanges(before, await catalogSnapshot(t))).toEqual({ added: [], changed: [], removed: [] });
  });

  it('refuses a Kandev table missing a column the service reads, naming every missing column', async () => {
    const t = await open(openKandevDatabase(dialect));
    await t.db.knex.raw('ALTER TABLE task_session_turns DROP COLUMN completed_at');
    await t.db.knex.raw('ALTER TABLE kandev_meta DROP COLUMN value');
    const error = await refusal(() => migrateSchema(t.db));
    expect(error.problems).toEqual(['missing column task_session_turns.completed_at', 'missing column kandev_meta.value']);
  });

  it("refuses SCHEMA_MODE=owned on a Kandev database: owned mode would create Kandev's tables", async () => {
    const t = await open(openKandevDatabase(dialect));
    const error = await refusal(() => migrateSchema(t.db, 'owned'));
    expect(error.message).toMatch(/SCHEMA_MODE=owned, but Kandev's tables already exist/);
    expect(error.problems.join('\n')).toMatch(/migration 0001, which creates Kandev's tables/);
  });

  it('refuses SCHEMA_MODE=kandev on an empty database, naming every table it lacks', async () => {
    const t = await open(openEmptyDatabase(dialect));
    const error = await refusal(() => migrateSchema(t.db, 'kandev'));
    expect(error.problems.map((p) => p.split(' ')[2])).toEqual(SERVICE_TABLE_NAMES);
  });

  it('refuses SCHEMA_MODE=kandev on a database this service created', async () => {
    const t = await open(openTestDatabase(dialect));
    const error = await refusal(() => migrateSchema(t.db, 'kandev'));
    expect(error.problems.join('\n')).toMatch(/0001_kandev_schema/);
  });

  it.each<SchemaModeSetting>(['auto', 'owned'])('creates the owned schema on an empty database with SCHEMA_MODE=%s', async (setting) => {
    const t = await open(openEmptyDatabase(dialect));
    expect(await migrateSchema(t.db, setting)).toMatchObject({
      mode: 'owned',
      applied: [
        '0001_kandev_schema',
        '0002_pending_projector_leases',
        '0003_pp_index_names',
        '0004_task_plan_comments_and_prompt_receipts',
        '0005_queue_management',
        '0006_summary_writes',
      ],
    });
    expect((await detectSchema(t.db)).shape).toBe('owned');
    expect(await migrateSchema(t.db, setting)).toMatchObject({ mode: 'owned', applied: [] });
  });

  it("gives an owned database today's schema with this service's indexes under their pp_ names, each as the queries need it", async () => {
    const t = await open(openTestDatabase(dialect));
    expect(await statesOf(t)).toEqual(Object.fromEntries(REQUIRED_NAMES.map((name) => [name, 'present'])));
    const indexes = [...(await catalogSnapshot(t)).keys()].filter((key) => key.startsWith('index:')).map((key) => key.slice('index:'.length));
    for (const gone of ['idx_turns_current_turn_order', 'idx_messages_metadata_pending_id', 'idx_messages_turn_type', 'idx_messages_task_author_created']) {
      expect(indexes).not.toContain(gone);
    }
    // Kandev's names with Kandev's definitions stay as 0001 created them.
    expect(indexes).toEqual(
      expect.arrayContaining(['idx_turns_session_started', 'idx_messages_session_updated', 'idx_task_sessions_task_state', 'idx_tasks_workspace_id']),
    );
  });
});

describe.skipIf(!isAvailable('postgres'))('Kandev mode on PostgreSQL only', () => {
  const opened: TestDatabase[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((t) => t.close()));
  });

  it('creates the very JSON helpers an owned database has', async () => {
    const owned = await openTestDatabase('postgres');
    const kandev = await openKandevDatabase('postgres');
    opened.push(owned, kandev);
    await migrateSchema(kandev.db);
    const helpers = async (t: TestDatabase) => [...(await catalogSnapshot(t)).entries()].filter(([key]) => key.startsWith('function:'));
    expect((await helpers(kandev)).map(([key]) => key)).toEqual([
      'function:pp_json_flag(doc text, key text)',
      'function:pp_json_flag_parsed(doc text, key text)',
      'function:pp_json_string(doc text, path text[])',
      'function:pp_json_string_or_absent(doc text, key text)',
      'function:pp_safe_jsonb(doc text)',
    ]);
    expect(await helpers(kandev)).toEqual(await helpers(owned));
  });

  it('reports the INVALID index a failed concurrent build leaves, and drops and rebuilds it on the next run', async () => {
    const t = await openKandevDatabase('postgres');
    opened.push(t);
    await migrateSchema(t.db);
    const { sessionId } = await seedSession(t.ctx);
    const turnId = await seedTurnAt(t.ctx, sessionId, { startedAt: '2026-01-02T03:04:05.000006000Z' });
    await seedClarificationBundle(t.ctx, { sessionId, turnId, metadata: { note: 'boom' } });
    // The helper the pending-id index calls fails on that row, as a build can fail on real data.
    await t.db.knex.raw(`CREATE OR REPLACE FUNCTION pp_json_string(doc text, path text[]) RETURNS text
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$ BEGIN IF strpos(doc, 'boom') > 0 THEN RAISE EXCEPTION 'boom'; END IF; RETURN NULL; END $$`);
    const failedRun = await addMissingIndexes(t.db);
    expect(failedRun.created).toEqual(['pp_turns_current_turn_order', 'pp_messages_turn_type']);
    expect(failedRun.failed).toEqual([{ name: 'pp_messages_pending_id', message: expect.stringMatching(/boom/) }]);
    expect(await statesOf(t)).toMatchObject({ pp_messages_pending_id: 'invalid' });

    await t.db.knex.raw(POSTGRES_JSON_FUNCTIONS);
    const events: IndexBuildEvent[] = [];
    const nextRun = await addMissingIndexes(t.db, (event) => events.push(event));
    expect(events.map((event) => `${event.kind} ${event.index.name}`)).toEqual([
      'dropping-invalid pp_messages_pending_id',
      'building pp_messages_pending_id',
      'built pp_messages_pending_id',
    ]);
    expect(nextRun).toMatchObject({ created: ['pp_messages_pending_id'], failed: [] });
    expect(await statesOf(t)).toEqual(Object.fromEntries(REQUIRED_NAMES.map((name) => [name, 'present'])));
  });
});

describe('the required index list', () => {
  it('names every index pp_, so no Kandev index can share its name', () => {
    for (const dialect of [sqliteDialect, postgresDialect, withTimestampForms(sqliteDialect, { mixed: true, writes: 'kandev' })]) {
      expect(requiredIndexes(dialect).every((index) => index.name.startsWith('pp_'))).toBe(true);
    }
    expect(requiredIndexes(sqliteDialect).map((index) => index.name)).toEqual(REQUIRED_NAMES);
    expect(requiredIndexes(postgresDialect).map((index) => index.name)).toEqual(REQUIRED_NAMES);
  });
});
