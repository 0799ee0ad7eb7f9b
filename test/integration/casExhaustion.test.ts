import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictExhaustedError, ERROR_CODES } from '../../src/errors.js';
import { createMetrics } from '../../src/metrics.js';
import { createProjectionStore, type ProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createTestProjector } from '../support/projector.js';
import { RecordingPublisher } from '../support/recordingPublisher.js';
import { seedTaskWithQuestion } from '../support/seed.js';

/**
 * The store, with a rival writer that moves each summary the projection just read on to the next
 * revision before the projection's compare-and-set, `times` times in all. The rival writes through
 * the projection's own transaction: on PostgreSQL the projection holds the row lock, and SQLite has
 * one writer, so no other connection could get in between; the statements are the real ones.
 */
function withRivalWriter(store: ProjectionStore, times: number): ProjectionStore & { rivalWrites: () => number } {
  let writes = 0;
  return {
    ...store,
    rivalWrites: () => writes,
    withTransaction: (fn) =>
      store.withTransaction((tx) =>
        fn({
          ...tx,
          readSummariesForUpdate: async (taskIds) => {
            const read = await tx.readSummariesForUpdate(taskIds);
            if (writes < times) {
              writes++;
              await tx.overwriteLocked([...read.values()].map((row) => ({ ...row, revision: row.revision + 1 })));
            }
            return read;
          },
        }),
      ),
  };
}

describeEachDialect('a projection that keeps losing its compare-and-set, on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  /** A task with an open question whose stored summary, at revision 4, does not say so yet. */
  async function staleTask() {
    const { taskId, workspaceId } = await seedTaskWithQuestion(t.ctx);
    const row = { taskId, workspaceId, revision: 4, summary: '{"git":{"additions":1}}', updatedAt: '2026-01-01T00:00:00.000000000Z' };
    await t.ctx
      .knex('task_status_summaries')
      .insert({ task_id: taskId, workspace_id: workspaceId, revision: 4, summary: row.summary, updated_at: row.updatedAt });
    return row;
  }

  async function project(times: number) {
    const row = await staleTask();
    const store = withRivalWriter(createProjectionStore(t.ctx), times);
    const publisher = new RecordingPublisher();
    const metrics = createMetrics();
    const projector = createTestProjector(t.ctx, { store, publisher, metrics, batchSize: 4 });
    const outcome = await projector.reproject(row.taskId).then(
      () => 'projected',
      (err: unknown) => err,
    );
    const conflicts = (await metrics.casConflicts.get()).values[0]?.value;
    const failed = (await metrics.projections.get()).values.find((v) => v.labels.result === 'failed')?.value ?? 0;
    return {
      row,
      outcome,
      publisher,
      conflicts,
      failed,
      rivalWrites: store.rivalWrites(),
      stored: (await loadStatusSummaries(t.ctx, [row.taskId])).get(row.taskId),
    };
  }

  it('rereads after each lost compare-and-set and gives up after the third with ConflictExhaustedError, publishing and writing nothing', async () => {
    const { row, outcome, publisher, conflicts, failed, rivalWrites, stored } = await project(3);
    expect(outcome).toBeInstanceOf(ConflictExhaustedError);
    expect((outcome as ConflictExhaustedError).code).toBe(ERROR_CODES.PROJECTION_CONFLICT_EXHAUSTED);
    expect(rivalWrites).toBe(3);
    expect(conflicts).toBe(3);
    expect(failed).toBe(1);
    expect(publisher.summaries).toEqual([]);
    expect(publisher.sessions).toEqual([]);
    // Only the rival's three revisions: the projection's summary never landed.
    expect(stored).toEqual({ ...row, revision: 7 });
  });

  it('settles on the reread after two lost compare-and-sets, one revision past the rival', async () => {
    const { row, outcome, publisher, conflicts, failed, stored } = await project(2);
    expect(outcome).toBe('projected');
    expect(conflicts).toBe(2);
    expect(failed).toBe(0);
    expect(publisher.summaries.map((u) => [u.taskId, u.summary.revision, u.summary.pending_action])).toEqual([[row.taskId, 7, 'clarification']]);
    expect(stored).toMatchObject({ taskId: row.taskId, revision: 7 });
    expect(JSON.parse(stored!.summary)).toEqual({ git: { additions: 1 }, pending_action: 'clarification' });
  });
});
