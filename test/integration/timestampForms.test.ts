import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storesOf } from '../../src/bin/assembly.js';
import { createRepositoryContext, rawRows, type RepositoryContext } from '../../src/repository/context.js';
import { currentTurnAuthority } from '../../src/repository/turns/currentTurnAuthority.js';
import { acquireLease } from '../../src/repository/projection/leases.js';
import { createMessage } from '../../src/repository/messages.js';
import { compareAndSetStatusSummaries, loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { createSession, createTask } from '../../src/repository/tasks/tasks.js';
import { requiredIndexes } from '../../src/repository/schema/requiredIndexes.js';
import { detectTimestampForms } from '../../src/repository/timestampForms.js';
import { completeTurn, getCurrentTurn, startTurn } from '../../src/repository/turns/turns.js';
import { readStoredTimestamp, storedTimestampForm, timestampToMicros } from '../../src/timestamps.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { seedSession, seedTurnAt } from '../support/seed.js';
import { kandevContext } from '../support/timestampTexts.js';

// Texts of one column in every form a Kandev-owned SQLite table may hold: Kandev's, trimmed to any
// length; the canonical form; SQLite's CURRENT_TIMESTAMP (Kandev's default for
// task_session_messages.updated_at).
const TEXTS = [
  '2026-08-20 10:00:00+00:00',
  '2026-08-20T10:00:00.000000000Z',
  '2026-08-20 10:00:00.000001+00:00',
  '2026-08-20T10:00:00.000500000Z',
  '2026-08-20 10:00:00.05+00:00',
  '2026-08-20 10:00:00.45+00:00',
  '2026-08-20T10:00:00.450000000Z',
  '2026-08-20 10:00:00.5+00:00',
  '2026-08-20T10:00:00.500000000Z',
  '2026-08-20 10:00:01',
  '2026-08-19T23:59:59.999999000Z',
  '2026-08-21 00:00:00.1+00:00',
];

/** A session plus one turn per text, each turn's started_at and created_at stored as that text. */
async function seedTexts(ctx: RepositoryContext, texts: readonly string[]): Promise<{ sessionId: string; ids: string[] }> {
  const { sessionId } = await seedSession(ctx);
  const ids: string[] = [];
  for (const [index, text] of texts.entries()) {
    const id = `${sessionId}:${String(index).padStart(2, '0')}`;
    await seedTurnAt(ctx, sessionId, { id, startedAt: text, completedAt: text }, () => text);
    ids.push(id);
  }
  return { sessionId, ids };
}

describeEachDialect('timestamps in either text form on %s', (dialect) => {
  let t: TestDatabase;
  let ctx: RepositoryContext;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    ctx = kandevContext(t.ctx);
  });
  afterAll(async () => {
    await t.close();
  });

  it('orders a column holding every form by instant (ties by id), and each key is the instant JavaScript reads back', async () => {
    // Kandev's SQLite rows carry nanoseconds, which the key truncates as JavaScript does; PostgreSQL
    // would round them on input, and never receives them from Kandev.
    const texts = dialect === 'sqlite' ? [...TEXTS, '2026-08-20 10:00:00.000000999+00:00', '2026-08-20 10:00:00.450000999+00:00'] : TEXTS;
    const { sessionId, ids } = await seedTexts(ctx, texts);
    const key = ctx.dialect.timestampKey('started_at');
    const rows = await rawRows<{ id: string; key: unknown; started_at: unknown }>(
      ctx,
      `SELECT id, ${key} AS key, started_at FROM task_session_turns WHERE task_session_id = ? ORDER BY ${key}, id`,
      [sessionId],
    );
    const byInstant = ids
      .map((id, index) => ({ id, instant: readStoredTimestamp(texts[index]!) }))
      .sort((a, b) => timestampToMicros(a.instant) - timestampToMicros(b.instant) || (a.id < b.id ? -1 : 1));
    expect(rows.map((r) => r.id)).toEqual(byInstant.map((r) => r.id));
    // The key compares with a bound canonical instant and with a cursor read back into JavaScript.
    expect(rows.map((r) => readStoredTimestamp(String(r.key)))).toEqual(byInstant.map((r) => r.instant));
    expect(rows.map((r) => readStoredTimestamp(String(r.started_at)))).toEqual(byInstant.map((r) => r.instant));
  });

  it('reads every stored form back canonical in records', async () => {
    const { sessionId } = await seedTexts(ctx, ['2026-08-20 10:00:00.5+00:00']);
    const current = await getCurrentTurn(ctx, sessionId);
    expect(current).toMatchObject({
      startedAt: '2026-08-20T10:00:00.500000000Z',
      createdAt: '2026-08-20T10:00:00.500000000Z',
      completedAt: '2026-08-20T10:00:00.500000000Z',
    });
  });
});

describe('the timestamp forms a SQLite database holds', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('sqlite');
  });
  afterAll(async () => {
    await t.close();
  });

  async function clear(): Promise<void> {
    await t.ctx.knex('tasks').del();
  }

  /** Turns and messages written with Kandev's text, as Kandev's Go driver writes them. */
  async function seedKandevRows(): Promise<string> {
    const kandev = kandevContext(t.ctx);
    const { sessionId } = await seedSession(kandev);
    const turn = await startTurn(kandev, sessionId, { startedAt: '2026-08-20T10:00:00.5Z' });
    await createMessage(kandev, { sessionId, turnId: turn.id, content: 'hello' });
    return sessionId;
  }

  it('writes canonical text and orders it as stored on an empty database of this service', async () => {
    await clear();
    const detection = await detectTimestampForms(t.ctx);
    expect(detection.forms).toEqual({ mixed: false, writes: 'canonical' });
    expect(detection.sampled).toEqual({ canonical: 0, kandev: 0, other: 0 });
  });

  it("writes Kandev's form on an empty database whose schema is Kandev's, and orders through the key", async () => {
    await clear();
    expect((await detectTimestampForms(t.ctx, { kandevSchema: true })).forms).toEqual({ mixed: true, writes: 'kandev' });
  });

  it("writes Kandev's form where the newest rows hold it", async () => {
    await clear();
    await seedKandevRows();
    const detection = await detectTimestampForms(t.ctx);
    expect(detection.forms).toEqual({ mixed: true, writes: 'kandev' });
    expect(detection.sampled).toEqual({ canonical: 0, kandev: 2, other: 0 });
  });

  it('keeps writing canonical text on a database holding only canonical rows, and orders it as stored', async () => {
    await clear();
    const { sessionId } = await seedSession(t.ctx);
    await startTurn(t.ctx, sessionId);
    expect((await detectTimestampForms(t.ctx)).forms).toEqual({ mixed: false, writes: 'canonical' });
    // A schema that is Kandev's may receive Kandev's rows any time: it orders through the key.
    expect((await detectTimestampForms(t.ctx, { kandevSchema: true })).forms).toEqual({ mixed: true, writes: 'canonical' });
  });

  it('orders through the key when the newest rows hold text in neither form', async () => {
    await clear();
    const { sessionId } = await seedSession(t.ctx);
    await seedTurnAt(t.ctx, sessionId, { startedAt: '2026-08-20T10:00:00Z' }, () => '2026-08-20 10:00:00');
    expect((await detectTimestampForms(t.ctx)).forms).toEqual({ mixed: true, writes: 'canonical' });
  });

  it('writes the form TIMESTAMP_FORM forces, whatever the rows hold', async () => {
    await clear();
    await seedKandevRows();
    expect((await detectTimestampForms(t.ctx, { setting: 'canonical' })).forms).toEqual({ mixed: true, writes: 'canonical' });
    await clear();
    expect((await detectTimestampForms(t.ctx, { setting: 'kandev' })).forms).toEqual({ mixed: true, writes: 'kandev' });
  });

  it('builds the stores with what it detected (the assembly every command uses)', async () => {
    await clear();
    await seedKandevRows();
    expect((await storesOf(t.db)).dialect.timestampForms).toEqual({ mixed: true, writes: 'kandev' });
    expect((await storesOf(t.db, { setting: 'canonical' })).dialect.timestampForms).toEqual({ mixed: true, writes: 'canonical' });
    await clear();
    const canonical = await storesOf(t.db);
    expect(canonical.dialect.timestampForms).toEqual({ mixed: false, writes: 'canonical' });
    // Canonical-only text keeps today's statements, which pp_turns_current_turn_order serves.
    expect(currentTurnAuthority(canonical.dialect, 't').orderBy).toBe(currentTurnAuthority(t.ctx.dialect, 't').orderBy);
    expect(currentTurnAuthority(canonical.dialect, 't').orderBy).toContain('t.started_at DESC, t.created_at DESC');
  });
});

describe("rows this service writes into a Kandev-form SQLite database, under Kandev's own plain-text ORDER BY", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('sqlite');
  });
  afterAll(async () => {
    await t.close();
  });

  /** Kandev's own query: the session's turns by started_at text, as its Go code sorts them. */
  async function kandevOrder(ctx: RepositoryContext, sessionId: string): Promise<string[]> {
    const rows = await rawRows<{ id: string }>(ctx, 'SELECT id FROM task_session_turns WHERE task_session_id = ? ORDER BY started_at, id', [sessionId]);
    return rows.map((r) => r.id);
  }

  it("writes every timestamp of a turn, message, session, task and summary in Kandev's form, so its rows sort among Kandev's", async () => {
    // Kandev's rows: its own text, nanoseconds included, around the instants this service writes at.
    await t.ctx
      .knex('tasks')
      .insert({ id: 'task-k', workspace_id: 'ws', title: 'k', created_at: '2026-08-20 09:00:00+00:00', updated_at: '2026-08-20 09:00:00+00:00' });
    await t.ctx
      .knex('task_sessions')
      .insert({ id: 'session-k', task_id: 'task-k', state: 'RUNNING', started_at: '2026-08-20 09:00:00+00:00', updated_at: '2026-08-20 09:00:00+00:00' });
    const kandevTurns = [
      ['turn-k1', '2026-08-20 10:00:00+00:00'],
      ['turn-k2', '2026-08-20 10:00:00.45+00:00'],
      ['turn-k3', '2026-08-20 10:00:00.500000001+00:00'],
      ['turn-k4', '2026-08-20 10:00:01.123456789+00:00'],
    ] as const;
    for (const [id, at] of kandevTurns) {
      await t.ctx
        .knex('task_session_turns')
        .insert({ id, task_session_id: 'session-k', task_id: 'task-k', started_at: at, completed_at: at, created_at: at, updated_at: at });
    }

    const opened = await storesOf(t.db);
    expect(opened.dialect.timestampForms).toEqual({ mixed: true, writes: 'kandev' });
    const { ctx, time } = withManualClock(opened, '2026-08-20T10:00:00.5Z');
    const ours = await startTurn(ctx, 'session-k');
    await completeTurn(ctx, ours.id);
    time.set('2026-08-20T10:00:01.123457Z');
    const later = await startTurn(ctx, 'session-k');

    // Between k2 (.45) and k3 (.500000001), then after k4 (…01.123456789): time order, in plain text.
    expect(await kandevOrder(ctx, 'session-k')).toEqual(['turn-k1', 'turn-k2', ours.id, 'turn-k3', 'turn-k4', later.id]);
    const stored = await ctx.knex('task_session_turns').select('started_at', 'created_at', 'updated_at', 'completed_at').where({ id: ours.id }).first();
    expect(stored).toEqual({
      started_at: '2026-08-20 10:00:00.5+00:00',
      created_at: '2026-08-20 10:00:00.5+00:00',
      updated_at: '2026-08-20 10:00:00.500001+00:00',
      completed_at: '2026-08-20 10:00:00.500001+00:00',
    });
    // The records still carry the canonical instants.
    expect(ours.startedAt).toBe('2026-08-20T10:00:00.500000000Z');
    expect(later.startedAt).toBe('2026-08-20T10:00:01.123457000Z');

    const message = await createMessage(ctx, { sessionId: 'session-k', turnId: later.id, content: 'hi', createdAt: '2026-08-20T10:00:02Z' });
    expect(message.createdAt).toBe('2026-08-20T10:00:02.000000000Z');
    const task = await createTask(ctx, { workspaceId: 'ws' });
    const session = await createSession(ctx, { taskId: task.id });
    await compareAndSetStatusSummaries(ctx, [{ taskId: task.id, workspaceId: 'ws', revision: 1, summary: '{}', updatedAt: '2026-08-20T10:00:03.250000000Z' }]);
    const texts = [
      ...Object.values(await ctx.knex('task_session_messages').select('created_at', 'updated_at').where({ id: message.id }).first()),
      ...Object.values(await ctx.knex('tasks').select('created_at', 'updated_at').where({ id: task.id }).first()),
      ...Object.values(await ctx.knex('task_sessions').select('started_at', 'updated_at').where({ id: session.id }).first()),
      ...Object.values(await ctx.knex('task_status_summaries').select('updated_at').where({ task_id: task.id }).first()),
    ];
    expect(texts.map((text) => storedTimestampForm(String(text)))).toEqual(texts.map(() => 'kandev'));
    expect(texts[0]).toBe('2026-08-20 10:00:02+00:00');
    expect((await loadStatusSummaries(ctx, [task.id])).get(task.id)?.updatedAt).toBe('2026-08-20T10:00:03.250000000Z');
  });

  it('keeps its own lease table canonical', async () => {
    const ctx = kandevContext(t.ctx);
    expect(await acquireLease(ctx, 'boot', 'me', 60_000)).toBe(true);
    const row = await ctx.knex('pending_projector_leases').select('expires_at').where({ name: 'boot' }).first();
    expect(storedTimestampForm(String(row.expires_at))).toBe('canonical');
  });

  it('stays canonical on a canonical database', async () => {
    const fresh = await openTestDatabase('sqlite');
    try {
      const { sessionId } = await seedSession(fresh.ctx);
      await startTurn(fresh.ctx, sessionId);
      const ctx = await storesOf(fresh.db);
      expect(ctx.dialect.timestampForms).toEqual({ mixed: false, writes: 'canonical' });
      const turn = await startTurn(ctx, sessionId);
      const stored = await ctx.knex('task_session_turns').select('started_at', 'created_at', 'updated_at').where({ id: turn.id }).first();
      expect(Object.values(stored).map((text) => storedTimestampForm(String(text)))).toEqual(['canonical', 'canonical', 'canonical']);
    } finally {
      await fresh.close();
    }
  });
});

describe('the index the current-turn order needs on a SQLite database holding Kandev-form rows', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('sqlite');
  });
  afterAll(async () => {
    await t.close();
  });

  // The index reported for Kandev-owned SQLite schemas (docs/schema.md "Timestamp forms"): the keys of
  // pp_turns_current_turn_order with started_at and created_at through SqlDialect.timestampKey.
  const key = (column: string) =>
    `(substr(${column}, 1, 10) || 'T' || substr(${column}, 12, 8) || '.' || substr(rtrim(substr(${column}, 21), 'Z+-:0') || '000000', 1, 6) || '000Z')`;
  const INDEX =
    'CREATE INDEX pp_turns_current_turn_order_key ON task_session_turns (task_session_id, ' +
    `(CASE WHEN completed_at IS NULL THEN 0 ELSE 1 END), ${key('started_at')} DESC, ${key('created_at')} DESC, id DESC)`;

  async function firstTurnPlan(ctx: RepositoryContext): Promise<string> {
    const { orderBy, predicate } = currentTurnAuthority(ctx.dialect, 't');
    const rows = await rawRows<{ detail: string }>(
      ctx,
      `EXPLAIN QUERY PLAN SELECT t.id FROM task_session_turns t WHERE t.task_session_id = 'probe' AND ${predicate} ORDER BY ${orderBy} LIMIT 1`,
    );
    return rows.map((r) => r.detail).join('\n');
  }

  it('is the key expression the statements use: with it the order needs no sort, without it a sort', async () => {
    const ctx = kandevContext(t.ctx);
    expect(key('t.started_at')).toBe(ctx.dialect.timestampKey('t.started_at'));
    expect(await firstTurnPlan(ctx)).toMatch(/TEMP B-TREE/);
    await ctx.knex.raw(INDEX);
    const plan = await firstTurnPlan(ctx);
    expect(plan).toMatch(/\bpp_turns_current_turn_order_key\b/);
    expect(plan).not.toMatch(/TEMP B-TREE/);
    // The canonical statements keep their own index.
    expect(await firstTurnPlan(createRepositoryContext(t.db))).toMatch(/\bpp_turns_current_turn_order\b/);
  });

  it('is the index the required-index list asks for on such a database', () => {
    const keyed = requiredIndexes(kandevContext(t.ctx).dialect).find((index) => index.name === 'pp_turns_current_turn_order_key');
    expect(keyed?.create).toBe(INDEX);
  });
});
