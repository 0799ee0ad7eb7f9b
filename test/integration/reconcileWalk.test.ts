import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Projector } from '../../src/projectors/projector.js';
import { reconcileTasks } from '../../src/projectors/reconcile.js';
import { createProjectionStore } from '../../src/repository/projection/projectionStore.js';
import { createTestProjector } from '../support/projector.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { RecordingPublisher } from '../support/recordingPublisher.js';
import { seedSession } from '../support/seed.js';

describeEachDialect('reconcile walk on %s', (dialect) => {
  let t: TestDatabase;
  let projector: Projector;
  let publisher: RecordingPublisher;
  let batches: string[][];
  const repair = async (taskIds: readonly string[]) => {
    batches.push([...taskIds]);
    return projector.reprojectBatch(taskIds);
  };
  beforeEach(async () => {
    t = await openTestDatabase(dialect);
    publisher = new RecordingPublisher();
    projector = createTestProjector(t.ctx, { publisher, batchSize: 2 });
    batches = [];
  });
  afterEach(async () => {
    await t.close();
  });

  it('gathers drift across pages into batches of about a page and repairs every drifted task once', async () => {
    const tasks = await Promise.all(Array.from({ length: 12 }, () => seedSession(t.ctx)));
    const ids = tasks.map((x) => x.taskId).sort();
    // Settle everything, then make every third task drift (summary gone, as if created meanwhile).
    await reconcileTasks({ store: createProjectionStore(t.ctx), pageSize: 100, repair });
    const drifted = ids.filter((_, i) => i % 3 === 0);
    await t.ctx.knex('task_status_summaries').whereIn('task_id', drifted).delete();
    batches = [];
    publisher.summaries = [];

    const pages: Array<[number, number]> = [];
    const result = await reconcileTasks({ store: createProjectionStore(t.ctx), pageSize: 3, repair, onPage: (p) => pages.push([p.visited, p.repaired]) });

    expect(result).toMatchObject({ visited: 12, drifted: 4, repaired: 4, failed: 0 });
    // One drifted task per page of three: repairs wait until three are known, the last one until the
    // walk ends, and a final report follows those last repairs.
    expect(batches).toEqual([drifted.slice(0, 3), drifted.slice(3)]);
    expect(pages).toEqual([
      [3, 0],
      [6, 0],
      [9, 3],
      [12, 3],
      [12, 4],
    ]);
    expect(publisher.summaries.map((u) => u.taskId).sort()).toEqual(drifted);
  });

  it('repairs what it gathered when stopped early, and an explicit list once per task', async () => {
    const tasks = await Promise.all(Array.from({ length: 6 }, () => seedSession(t.ctx)));
    const ids = tasks.map((x) => x.taskId).sort();
    let pagesSeen = 0;
    const stopped = await reconcileTasks({
      store: createProjectionStore(t.ctx),
      pageSize: 4,
      repair,
      shouldStop: () => pagesSeen > 0,
      onPage: () => pagesSeen++,
    });
    expect(stopped).toMatchObject({ visited: 4, drifted: 4, repaired: 4 });
    expect(batches).toEqual([ids.slice(0, 4)]);

    batches = [];
    const explicit = await reconcileTasks({ store: createProjectionStore(t.ctx), pageSize: 4, repair, taskIds: [ids[5]!, ids[4]!, ids[5]!, ids[0]!] });
    expect(explicit).toMatchObject({ visited: 3, drifted: 2, repaired: 2, failed: 0 });
    expect(batches).toEqual([[ids[5], ids[4]]]);
  });
});
