import type { NatsConnection } from '@nats-io/transport-node';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { createPendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { PENDING_ACTION_EPOCH_KEY } from '../../src/repository/projection/meta.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { readStoredTimestamp, toCanonicalTimestamp } from '../../src/timestamps.js';
import { describeEachDialect, openKandevDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { kandevTexts, kandevWriter } from '../support/rowWriters.js';
import { seedClarificationBundle, seedSession, seedTurnAt } from '../support/seed.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

// The first two tests seed the fixture's column set through this service's repository (canonical
// text); the last writes Kandev's rows as Kandev does (test/support/rowWriters.ts) and checks what
// this service writes among them.
describeEachDialect('the worker on a database Kandev created, on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let summaries: ReturnType<typeof collectSummaries>;
  const logs: Array<{ level: number; msg: string; index?: string; state?: string; applied?: string[] }> = [];

  beforeAll(async () => {
    t = await openKandevDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`kandev_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it("starts on Kandev's tables, having added only its own objects, and warns once per index the queries lack", async () => {
    expect(logs.find((line) => line.msg === 'applied migrations')?.applied).toEqual([
      'kandev_mode_0001_own_objects',
      'kandev_mode_0002_prompt_receipts',
      'kandev_mode_0003_queue_management',
      'kandev_mode_0004_summary_writes',
    ]);
    const warnings = logs.filter((line) => line.level === 40 && line.index !== undefined);
    expect(warnings.map((line) => [line.index, line.state])).toEqual([
      [dialect === 'sqlite' ? 'pp_turns_current_turn_order_key' : 'pp_turns_current_turn_order', 'missing'],
      ['pp_messages_pending_id', 'missing'],
      ['pp_messages_turn_type', 'missing'],
    ]);
    expect(warnings.every((line) => line.msg.includes('pending-projector migrate --add-indexes'))).toBe(true);
    const epoch = await t.ctx.knex('kandev_meta').where({ key: PENDING_ACTION_EPOCH_KEY }).first();
    expect(epoch?.value).toBe('1');
  });

  it('projects a task end to end: the question on the open turn reaches the bus and Kandev’s summary table', async () => {
    const { taskId, sessionId } = await seedSession(t.ctx);
    const turnId = await seedTurnAt(t.ctx, sessionId, { startedAt: '2026-03-04T05:06:07.123456000Z' });
    const { messages } = await seedClarificationBundle(t.ctx, { sessionId, turnId });
    nc.publish(
      `${prefix}message.added`,
      envelope('message.added', { task_id: taskId, session_id: sessionId, message_id: messages[0]!.id, type: 'clarification_request' }),
    );
    const latest = await eventually(() => (summaries.latest(taskId)?.status_summary.pending_action === 'clarification' ? summaries.latest(taskId) : undefined));
    // The summary is published before its transaction commits: read the row once that projection is done.
    await worker.projector.whenIdle();
    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    expect(stored.revision).toBe(latest.status_summary.revision);
    expect(JSON.parse(stored.summary)).toEqual({ pending_action: 'clarification' });
  });

  it("writes what it writes into Kandev's tables in Kandev's form, so Kandev's plain ORDER BY keeps time order", async () => {
    const kandev = kandevWriter(t.ctx);
    const kandevNow = () => kandevTexts(dialect, 'kandev')(toCanonicalTimestamp(new Date()), 'updated_at');
    // Two clocks in two writers: a few milliseconds apart, each write is later than the one before.
    const later = () => new Promise((resolve) => setTimeout(resolve, 5));
    const { taskId, sessionId, workspaceId } = await kandev.session();
    const other = await kandev.session({ workspaceId });
    await kandev.summary({ taskId: other.taskId, workspaceId, revision: 1, summary: '{}', updatedAt: new Date().toISOString() });
    const turn = await kandev.startTurn(sessionId);
    const before = await kandev.message({ sessionId, content: 'streamed before the question' });
    const { pendingId, messages } = await kandev.bundle({ sessionId, turnId: turn.id, statuses: ['pending', 'pending'] });
    const bundleIds = messages.map((m) => m.id);
    const after = await kandev.message({ sessionId, content: 'streamed after the question' });
    const touch = async (id: string) => {
      await later();
      await t.ctx.knex('task_session_messages').where({ id }).update({ content: 'edited', updated_at: kandevNow() });
      await later();
    };
    const byUpdatedAt = async () =>
      (
        await t.ctx
          .knex('task_session_messages')
          .select('id')
          .where({ task_session_id: sessionId })
          .orderBy([{ column: 'updated_at' }, { column: 'id' }])
      ).map((r: { id: string }) => r.id);
    const updatedAtOf = async (ids: string[]) =>
      (await t.ctx.knex('task_session_messages').select('updated_at').whereIn('id', ids)).map((r: { updated_at: unknown }) => r.updated_at);

    nc.publish(`${prefix}message.added`, envelope('message.added', { task_id: taskId, session_id: sessionId, type: 'clarification_request' }));
    const published = await eventually(() =>
      summaries.latest(taskId)?.status_summary.pending_action === 'clarification' ? summaries.latest(taskId) : undefined,
    );
    // The summary is published before its transaction commits (ADR 0004).
    await worker.projector.whenIdle();
    const summaryRows = await t.ctx
      .knex('task_status_summaries')
      .select('task_id', 'updated_at')
      .where({ workspace_id: workspaceId })
      .orderBy([{ column: 'updated_at' }]);
    expect(summaryRows.map((r: { task_id: string }) => r.task_id)).toEqual([other.taskId, taskId]);
    expectKandevForm(summaryRows[1].updated_at, published.status_summary.updated_at);

    await touch(before.id);
    const client = createPendingProjectorClient(nc, { prefix });
    expect(await client.detach({ session_id: sessionId })).toMatchObject({ ok: true, detached_message_ids: bundleIds });
    await touch(after.id);
    // One statement stamps the bundle's rows alike: they tie, and the id orders them.
    const bundleByTie = [...bundleIds].sort();
    expect(await byUpdatedAt()).toEqual([before.id, ...bundleByTie, after.id]);
    for (const value of await updatedAtOf(bundleIds)) expectKandevForm(value);

    // The claim (and its finalisation) rewrites the rows' metadata and updated_at: valid JSON, which
    // Kandev's own pending_id expression index reads on every write, and Kandev's form again.
    const reply = await client.respond({
      pending_id: pendingId,
      answers: [
        { question_id: 'q1', selected_options: ['a'] },
        { question_id: 'q2', selected_options: ['b'] },
      ],
    });
    expect(reply).toMatchObject({ ok: true, claimed: true, delivery: 'resume' });
    expect(await byUpdatedAt()).toEqual([before.id, after.id, ...bundleByTie]);
    const claimed = await t.ctx.knex('task_session_messages').select('metadata', 'updated_at').whereIn('id', bundleIds);
    for (const row of claimed) {
      expect(JSON.parse(row.metadata)).toMatchObject({ pending_id: pendingId, status: 'answered' });
      expectKandevForm(row.updated_at);
    }
    expect(reply.ok && [...new Set(claimed.map((row: { updated_at: unknown }) => readStoredTimestamp(String(row.updated_at))))]).toEqual([
      reply.ok && reply.responded_at,
    ]);

    // It created no turn and no message of its own: every row in the session is one Kandev wrote.
    expect((await t.ctx.knex('task_session_turns').select('id').where({ task_session_id: sessionId })).map((r: { id: string }) => r.id)).toEqual([turn.id]);
    expect((await byUpdatedAt()).sort()).toEqual([before.id, ...bundleIds, after.id].sort());
  });

  /** SQLite: Kandev's text exactly (PostgreSQL: an instant); either way the instant `expected` names when given. */
  function expectKandevForm(stored: unknown, expected?: string): void {
    const text = String(stored);
    if (dialect === 'sqlite') expect(text).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{0,8}[1-9])?\+00:00$/);
    else expect(text).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}000Z$/);
    if (expected !== undefined) expect(readStoredTimestamp(text)).toBe(expected);
  }
});

// The worker started on a database Kandev has already written, half its rows in each text: the
// forms are detected from those rows, and the boot reconcile repairs every task from them.
describeEachDialect('the boot reconcile on a database Kandev has written, on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let prefix: string;

  beforeAll(async () => {
    t = await openKandevDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`kboot_${dialect}`);
  });
  afterAll(async () => {
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('repairs every task under its lease and publishes each summary, reading the forms from the rows', async () => {
    const kandev = kandevWriter(t.ctx, 'mixed', 7);
    const expected = new Map<string, string | undefined>();
    for (let i = 0; i < 4; i++) {
      const { taskId, sessionId } = await kandev.session();
      const older = await kandev.turnAt(sessionId, { startedAt: `2026-08-20T10:00:0${i}.5Z`, completedAt: `2026-08-20T10:00:0${i}.75Z` });
      await kandev.bundle({ sessionId, turnId: older });
      // Every other task has moved on to a newer turn, which supersedes the older turn's question.
      if (i % 2 === 1) await kandev.turnAt(sessionId, { startedAt: `2026-08-20T10:00:0${i}.8Z` });
      expected.set(taskId, i % 2 === 1 ? undefined : 'clarification');
    }
    const summaries = collectSummaries(nc, prefix);
    const logs: Array<{ msg: string; writes?: string; mixed?: boolean }> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
    const worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { bootReconcile: true }), logger });
    try {
      expect(await worker.bootReconcile).toMatchObject({ visited: 4, drifted: 4, repaired: 4, failed: 0 });
      const timestamps = logs.find((line) => line.msg.startsWith('timestamps: '));
      expect(timestamps).toMatchObject(dialect === 'sqlite' ? { writes: 'kandev', mixed: true } : { writes: 'canonical', mixed: false });
      await eventually(() => ([...expected.keys()].every((taskId) => summaries.latest(taskId)) ? true : undefined), 10_000, 'a summary per task');
      for (const [taskId, pending] of expected) expect(summaries.latest(taskId)!.status_summary.pending_action).toBe(pending);
    } finally {
      await worker.stop();
      summaries.stop();
    }
  });
});
