import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logger.js';
import type { SummaryPublisher } from '../../src/projectors/ports.js';
import { projectTasks, type BatchProjection, type TaskProjection } from '../../src/projectors/projectTasks.js';
import { createProjectionStore, type ProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createTestProjector } from '../support/projector.js';
import { RecordingPublisher } from '../support/recordingPublisher.js';
import { seedTaskWithQuestion } from '../support/seed.js';

/** The tasks of a batch that ended with this outcome, in order. */
const withOutcome = (batch: BatchProjection, outcome: TaskProjection['outcome']) =>
  [...batch].filter(([, p]) => p.outcome === outcome).map(([taskId]) => taskId);
/** The tasks a batch settled (committed, already current, or unknown). */
const settled = (batch: BatchProjection) => [...batch].filter(([, p]) => p.outcome !== 'conflict' && p.outcome !== 'bus_refused').map(([taskId]) => taskId);

describeEachDialect('batched projection on %s', (dialect) => {
  let t: TestDatabase;
  let store: ProjectionStore;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    store = createProjectionStore(t.ctx);
  });
  afterAll(async () => {
    await t.close();
  });

  const taskWithQuestion = () => seedTaskWithQuestion(t.ctx);

  it('writes and publishes exactly the semantic changes of a page, each at revision + 1, in one go', async () => {
    const missing = await taskWithQuestion();
    const stale = await taskWithQuestion();
    const correct = await taskWithQuestion();
    const corrupt = await taskWithQuestion();
    const row = (taskId: string, workspaceId: string, summary: string) => ({
      task_id: taskId,
      workspace_id: workspaceId,
      revision: 4,
      summary,
      updated_at: '2026-01-01T00:00:00.000000000Z',
    });
    await t.ctx
      .knex('task_status_summaries')
      .insert([
        row(stale.taskId, stale.workspaceId, '{"git":{"additions":1}}'),
        row(correct.taskId, correct.workspaceId, '{"pending_action":"clarification"}'),
        row(corrupt.taskId, corrupt.workspaceId, 'not json'),
      ]);
    const publisher = new RecordingPublisher();
    const ids = [missing.taskId, stale.taskId, correct.taskId, corrupt.taskId, 'no-such-task'];
    const batch = await projectTasks({ store, publisher, logger: silentLogger() }, ids);
    expect(withOutcome(batch, 'conflict')).toEqual([]);
    expect(Object.fromEntries([...batch].map(([id, r]) => [id, 'revision' in r ? [r.outcome, r.revision] : r.outcome]))).toEqual({
      [missing.taskId]: ['changed', 1],
      [stale.taskId]: ['changed', 5],
      [correct.taskId]: ['unchanged', 4],
      [corrupt.taskId]: ['changed', 5],
      'no-such-task': 'unknown_task',
    });
    expect(publisher.summaries.map((u) => u.taskId).sort()).toEqual([missing.taskId, stale.taskId, corrupt.taskId].sort());
    expect(publisher.summaries.find((u) => u.taskId === stale.taskId)!.summary).toMatchObject({
      revision: 5,
      pending_action: 'clarification',
      git: { additions: 1 },
    });
    const stored = await loadStatusSummaries(t.ctx, ids);
    expect(JSON.parse(stored.get(corrupt.taskId)!.summary)).toEqual({ pending_action: 'clarification' });
  });

  /** The statements of one projection of a fresh task and, among them, when it first released its slot (slots are idempotent). */
  async function slotReleaseAmongStatements(projectionStore: ProjectionStore): Promise<string[]> {
    const { taskId } = await taskWithQuestion();
    const publisher = new RecordingPublisher();
    const seen: string[] = [];
    const onQuery = (q: { sql: string }) => seen.push(q.sql.trim().split(/\s+/)[0]!.toUpperCase());
    let released = false;
    const release = () => {
      if (!released) seen.push(`release after ${publisher.summaries.length} publish`);
      released = true;
    };
    t.db.knex.on('query', onQuery);
    try {
      await projectTasks({ store: projectionStore, publisher, logger: silentLogger() }, [taskId], { release });
    } finally {
      t.db.knex.removeListener('query', onQuery);
    }
    return seen;
  }

  it('says when only COMMIT is left: after every publish, before the COMMIT statement', async () => {
    const early = { ...store, capabilities: { ...store.capabilities, releasesSlotBeforeCommit: true } };
    const seen = await slotReleaseAmongStatements(early);
    expect(seen.slice(-3)).toEqual(['INSERT', 'release after 1 publish', 'COMMIT']);
  });

  it(`releases the slot ${dialect === 'postgres' ? 'before' : 'after'} COMMIT, as the dialect says`, async () => {
    const seen = await slotReleaseAmongStatements(store);
    expect(seen.slice(-3)).toEqual(dialect === 'postgres' ? ['INSERT', 'release after 1 publish', 'COMMIT'] : ['INSERT', 'COMMIT', 'release after 1 publish']);
  });

  it('projects a task listed twice in a batch once', async () => {
    const { taskId } = await taskWithQuestion();
    const publisher = new RecordingPublisher();
    const batch = await projectTasks({ store, publisher, logger: silentLogger() }, [taskId, taskId]);
    expect(withOutcome(batch, 'conflict')).toEqual([]);
    expect(batch.get(taskId)).toMatchObject({ outcome: 'changed', revision: 1 });
    expect(publisher.summaries.map((u) => u.summary.revision)).toEqual([1]);
  });

  // SQLite serialises writers (BEGIN IMMEDIATE), so only PostgreSQL can see a first insert race.
  if (dialect === 'postgres') {
    it('hands a task whose first insert lost to a concurrent insert to a single projection, which settles it', async () => {
      const { taskId, workspaceId } = await taskWithQuestion();
      const publisher = new RecordingPublisher();
      const rival = await t.ctx.knex.transaction();
      const rivalPid = (await rival.raw('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await rival.raw(`INSERT INTO task_status_summaries (task_id, workspace_id, revision, summary, updated_at) VALUES (?, ?, 1, '{}', ?)`, [
        taskId,
        workspaceId,
        '2026-11-30T00:00:00.000000000Z',
      ]);
      // The batch sees no row to lock, then its insert waits on the rival's uncommitted one.
      const batch = projectTasks({ store, publisher, logger: silentLogger() }, [taskId]);
      for (let waited = 0; ; waited += 10) {
        const rows = (await t.ctx.knex.raw('SELECT count(*)::int AS n FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))', [rivalPid])).rows;
        if (rows[0].n > 0) break;
        if (waited > 5000) throw new Error('the batch never waited on the rival insert');
        await new Promise((r) => setTimeout(r, 10));
      }
      await rival.commit();
      expect(withOutcome(await batch, 'conflict')).toEqual([taskId]);
      expect(publisher.summaries).toEqual([]);
      const projector = createTestProjector(t.ctx, { publisher, batchSize: 2 });
      expect(await projector.reprojectBatch([taskId])).toEqual([]);
      const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
      expect(stored).toMatchObject({ revision: 2, summary: '{"pending_action":"clarification"}' });
      expect(publisher.summaries.map((u) => u.summary.revision)).toEqual([2]);
    });
  }

  it('commits what reached the bus and puts back, as they were, the rows whose publish the bus refused', async () => {
    const fresh = await taskWithQuestion();
    const refusedNew = await taskWithQuestion();
    const refusedStale = await taskWithQuestion();
    const staleRow = {
      task_id: refusedStale.taskId,
      workspace_id: refusedStale.workspaceId,
      revision: 4,
      summary: '{"git":{"additions":1}}',
      updated_at: '2026-01-01T00:00:00.000000000Z',
    };
    await t.ctx.knex('task_status_summaries').insert(staleRow);
    const refused = new Set([refusedNew.taskId, refusedStale.taskId]);
    const published: string[] = [];
    const failing: SummaryPublisher = {
      publishSummary: async (u) => {
        if (refused.has(u.taskId)) throw new Error(`bus refused ${u.taskId}`);
        published.push(u.taskId);
        return 'published';
      },
      publishSessionPendingActions: async () => undefined,
    };
    const batch = await projectTasks({ store, publisher: failing, logger: silentLogger() }, [fresh.taskId, refusedNew.taskId, refusedStale.taskId]);
    expect(published).toEqual([fresh.taskId]);
    expect(settled(batch)).toEqual([fresh.taskId]);
    expect(batch.get(fresh.taskId)).toMatchObject({ outcome: 'changed', revision: 1 });
    expect(withOutcome(batch, 'bus_refused').sort()).toEqual([...refused].sort());
    expect(((batch.get(refusedNew.taskId) as { error: unknown }).error as Error).message).toBe(`bus refused ${refusedNew.taskId}`);
    const stored = await loadStatusSummaries(t.ctx, [fresh.taskId, refusedNew.taskId, refusedStale.taskId]);
    expect(stored.get(fresh.taskId)?.revision).toBe(1);
    expect(stored.has(refusedNew.taskId)).toBe(false);
    expect(stored.get(refusedStale.taskId)).toEqual({
      taskId: staleRow.task_id,
      workspaceId: staleRow.workspace_id,
      revision: 4,
      summary: staleRow.summary,
      updatedAt: staleRow.updated_at,
    });
  });
});
