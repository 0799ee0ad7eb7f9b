import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics.js';
import type { SummaryUpdate } from '../../src/projectors/ports.js';
import { createProjectionStore, type ProjectionStore, type ProjectionTransaction } from '../../src/repository/projection/projectionStore.js';
import { loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { createTestProjector } from '../support/projector.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { RecordingPublisher } from '../support/recordingPublisher.js';
import { seedTaskWithQuestion } from '../support/seed.js';

/**
 * Records what reaches the bus; the first publish of `holdTask` waits for `release()` (its
 * transaction stays open, as on a slow bus), and every publish of `refuseTask` fails.
 */
class GatedPublisher extends RecordingPublisher {
  private gate: Promise<void>;
  release!: () => void;
  held!: Promise<void>;
  private heldNow!: () => void;

  constructor(
    private readonly holdTask: string,
    private readonly refuseTask?: string,
  ) {
    super();
    this.gate = new Promise((resolve) => (this.release = resolve));
    this.held = new Promise((resolve) => (this.heldNow = resolve));
  }

  override async publishSummary(update: SummaryUpdate) {
    if (update.taskId === this.holdTask) {
      this.heldNow();
      await this.gate;
    }
    if (update.taskId === this.refuseTask) throw new Error(`bus refused ${update.taskId}`);
    return super.publishSummary(update);
  }
}

describeEachDialect('live projections sharing a transaction on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  const taskWithQuestion = async () => (await seedTaskWithQuestion(t.ctx)).taskId;

  async function batchSizes(metrics: ReturnType<typeof createMetrics>) {
    const values = (await metrics.projectionBatchTasks.get()).values;
    return {
      transactions: values.find((v) => v.metricName?.endsWith('_count'))?.value,
      tasks: values.find((v) => v.metricName?.endsWith('_sum'))?.value,
    };
  }

  it('puts the tasks that queued behind a busy transaction into the next one, each at revision 1', async () => {
    const [first, ...queued] = [await taskWithQuestion(), await taskWithQuestion(), await taskWithQuestion(), await taskWithQuestion()];
    const publisher = new GatedPublisher(first!);
    const metrics = createMetrics();
    const projector = createTestProjector(t.ctx, { publisher, metrics, batchSize: 8, transactions: 1 });
    const firstDone = projector.reproject(first!);
    await publisher.held;
    const queuedDone = queued.map((taskId) => projector.reproject(taskId));
    publisher.release();
    await Promise.all([firstDone, ...queuedDone]);
    expect(await batchSizes(metrics)).toEqual({ transactions: 2, tasks: 4 });
    expect(publisher.summaries.map((u) => [u.taskId, u.summary.revision, u.summary.pending_action])).toEqual(
      [first!, ...queued].map((taskId) => [taskId, 1, 'clarification']),
    );
    const stored = await loadStatusSummaries(t.ctx, [first!, ...queued]);
    expect([...stored.values()].map((s) => s.revision)).toEqual([1, 1, 1, 1]);
    expect(publisher.sessions).toHaveLength(4);
  });

  it('reprojects each task on its own when the session publish after a shared commit fails, and settles them all', async () => {
    const first = await taskWithQuestion();
    const queued = [await taskWithQuestion(), await taskWithQuestion()];
    const publisher = new GatedPublisher(first);
    const recordSessions = publisher.publishSessionPendingActions.bind(publisher);
    let refusals = 0;
    publisher.publishSessionPendingActions = async (updates) => {
      // The shared transaction's session publish (both queued tasks) fails once.
      if (updates.length > 1 && refusals++ === 0) throw new Error('bus refused the session publish');
      await recordSessions(updates);
    };
    const metrics = createMetrics();
    const projector = createTestProjector(t.ctx, { publisher, metrics, batchSize: 8, transactions: 1 });
    const firstDone = projector.reproject(first);
    await publisher.held;
    const queuedDone = queued.map((taskId) => projector.reproject(taskId));
    publisher.release();
    await Promise.all([firstDone, ...queuedDone]);
    expect(refusals).toBe(1);
    // first alone, the shared one, then one each for the queued tasks: unchanged, sessions republished.
    expect(await batchSizes(metrics)).toEqual({ transactions: 4, tasks: 5 });
    const stored = await loadStatusSummaries(t.ctx, [first, ...queued]);
    expect([...stored.values()].map((s) => s.revision)).toEqual([1, 1, 1]);
    expect(publisher.summaries.map((u) => u.taskId)).toEqual([first, ...queued]);
    expect(publisher.sessions.map((u) => u.taskId).sort()).toEqual([first, ...queued].sort());
  });

  /**
   * The database's projection store, counting the transactions between BEGIN and the end of their
   * statements, where a slot is held (PostgreSQL's COMMIT runs after the slot was given up, beside
   * the next transaction); `tweak` replaces some of a transaction's operations.
   */
  function slotCountingStore(tweak: {
    readSummariesForUpdate?: (tx: ProjectionTransaction, taskIds: readonly string[]) => ReturnType<ProjectionTransaction['readSummariesForUpdate']>;
    compareAndSet?: (tx: ProjectionTransaction, rows: Parameters<ProjectionTransaction['compareAndSet']>[0]) => Promise<Set<string>>;
  }) {
    const base = createProjectionStore(t.ctx);
    let open = 0;
    let most = 0;
    const store: ProjectionStore = {
      ...base,
      withTransaction(fn) {
        return base.withTransaction(async (tx) => {
          open++;
          most = Math.max(most, open);
          try {
            return await fn({
              readSummariesForUpdate: (taskIds) =>
                tweak.readSummariesForUpdate ? tweak.readSummariesForUpdate(tx, taskIds) : tx.readSummariesForUpdate(taskIds),
              readSummaryWrites: (taskIds) => tx.readSummaryWrites(taskIds),
              recordSummaryWrites: (writes) => tx.recordSummaryWrites(writes),
              recordForeignSummaryWrites: (found) => tx.recordForeignSummaryWrites(found),
              loadPendingStates: (taskIds) => tx.loadPendingStates(taskIds),
              compareAndSet: (rows) => (tweak.compareAndSet ? tweak.compareAndSet(tx, rows) : tx.compareAndSet(rows)),
              overwriteLocked: (rows) => tx.overwriteLocked(rows),
              restore: (restores) => tx.restore(restores),
              now: () => tx.now(),
            });
          } finally {
            open--;
          }
        });
      },
    };
    return { store, mostAtOnce: () => most };
  }

  it('projects the tasks of a failed shared transaction one at a time, never beyond the transaction cap', async () => {
    const first = await taskWithQuestion();
    const queued = [await taskWithQuestion(), await taskWithQuestion(), await taskWithQuestion()];
    const publisher = new GatedPublisher(first);
    let broken = 0;
    const { store, mostAtOnce } = slotCountingStore({
      // The shared transaction of the queued tasks fails once, as a statement a task breaks would.
      readSummariesForUpdate: (tx, taskIds) => {
        if (taskIds.length > 1 && broken++ === 0) throw new Error('a shared statement failed');
        return tx.readSummariesForUpdate(taskIds);
      },
    });
    const projector = createTestProjector(t.ctx, { publisher, store, batchSize: 8, transactions: 1 });
    const firstDone = projector.reproject(first);
    await publisher.held;
    const queuedDone = queued.map((taskId) => projector.reproject(taskId));
    publisher.release();
    await Promise.all([firstDone, ...queuedDone]);
    expect(broken).toBe(1);
    expect(mostAtOnce()).toBe(1);
    expect(publisher.summaries.map((u) => u.taskId)).toEqual([first, ...queued]);
  });

  it('takes a slot again for the reread after a lost compare-and-set, waiting for the transaction that took it meanwhile', async () => {
    const contested = await taskWithQuestion();
    const next = await taskWithQuestion();
    const publisher = new RecordingPublisher();
    let contestedWrites = 0;
    let nextQueued!: Promise<void>;
    const { store, mostAtOnce } = slotCountingStore({
      // `next` holds its transaction a while: a reread that did not wait for the slot would overlap it.
      readSummariesForUpdate: async (tx, taskIds) => {
        if (taskIds.includes(next)) await new Promise((resolve) => setTimeout(resolve, 50));
        return tx.readSummariesForUpdate(taskIds);
      },
      // The contested task loses its first compare-and-set, and `next` queues while it does.
      compareAndSet: async (tx, rows) => {
        if (rows.some((r) => r.taskId === contested) && contestedWrites++ === 0) {
          nextQueued = projector.reproject(next);
          return new Set();
        }
        return tx.compareAndSet(rows);
      },
    });
    const projector = createTestProjector(t.ctx, { publisher, store, batchSize: 8, transactions: 1 });
    await projector.reproject(contested);
    await nextQueued;
    // Lost, then won on the reread.
    expect(contestedWrites).toBe(2);
    expect(mostAtOnce()).toBe(1);
    expect(publisher.summaries.map((u) => u.taskId).sort()).toEqual([contested, next].sort());
  });

  it('fails only the task the bus refuses when it shared a transaction with others', async () => {
    const first = await taskWithQuestion();
    const good = await taskWithQuestion();
    const refused = await taskWithQuestion();
    const publisher = new GatedPublisher(first, refused);
    const metrics = createMetrics();
    const projector = createTestProjector(t.ctx, { publisher, metrics, batchSize: 8, transactions: 1 });
    const firstDone = projector.reproject(first);
    await publisher.held;
    const goodDone = projector.reproject(good);
    // The expectation is attached at once: the refusal may settle before `good` does, and a
    // rejection with no handler by then is reported as unhandled.
    const refusedDone = expect(projector.reproject(refused)).rejects.toThrow(`bus refused ${refused}`);
    publisher.release();
    await firstDone;
    await goodDone;
    await refusedDone;
    // One transaction for `first`, one shared by the other two: `good` committed with it, and
    // `refused` failed alone with its row put back (its event will be retried).
    expect(await batchSizes(metrics)).toEqual({ transactions: 2, tasks: 3 });
    const stored = await loadStatusSummaries(t.ctx, [first, good, refused]);
    expect(stored.get(good)?.revision).toBe(1);
    expect(stored.has(refused)).toBe(false);
    expect(publisher.summaries.map((u) => [u.taskId, u.summary.revision])).toEqual([
      [first, 1],
      [good, 1],
    ]);
  });

  it('frees the slot once a transaction committed, and admits the next task: it projects while the session publish is still on its way', async () => {
    const first = await taskWithQuestion();
    const next = await taskWithQuestion();
    const publisher = new RecordingPublisher();
    let releaseSessions!: () => void;
    const sessionsGate = new Promise<void>((resolve) => (releaseSessions = resolve));
    let sessionsHeld!: () => void;
    const held = new Promise<void>((resolve) => (sessionsHeld = resolve));
    const recordSessions = publisher.publishSessionPendingActions.bind(publisher);
    publisher.publishSessionPendingActions = async (updates) => {
      if (updates.some((u) => u.taskId === first)) {
        sessionsHeld();
        await sessionsGate;
      }
      await recordSessions(updates);
    };
    // Batch size 1: `first`, past its COMMIT, must not take the only place in flight either.
    const projector = createTestProjector(t.ctx, { publisher, batchSize: 1, transactions: 1 });
    const firstDone = projector.reproject(first);
    await held;
    try {
      const waitedForTheSlot = new Promise((_, reject) => setTimeout(() => reject(new Error('the next task waited for the previous session publish')), 3000));
      await Promise.race([projector.reproject(next), waitedForTheSlot]);
      expect(publisher.summaries.map((u) => u.taskId)).toEqual([first, next]);
      expect(publisher.sessions.map((u) => u.taskId)).toEqual([next]);
    } finally {
      releaseSessions();
      await firstDone;
    }
    expect(publisher.sessions.map((u) => u.taskId)).toEqual([next, first]);
  });

  it('keeps every transaction slot fed with full batches (SQLite: one writer)', async () => {
    const first = await taskWithQuestion();
    const queued = [await taskWithQuestion(), await taskWithQuestion(), await taskWithQuestion(), await taskWithQuestion()];
    const publisher = new GatedPublisher(first);
    const metrics = createMetrics();
    const projector = createTestProjector(t.ctx, { publisher, metrics, batchSize: 2, transactions: 2 });
    const firstDone = projector.reproject(first);
    await publisher.held;
    const queuedDone = queued.map((taskId) => projector.reproject(taskId));
    if (dialect === 'postgres') {
      // `first` holds one transaction open; the other slot serves the queue meanwhile: the first
      // queued task alone at once, then the others in batches of the batch size as they wait together.
      try {
        await Promise.all(queuedDone);
        expect(await batchSizes(metrics)).toEqual({ transactions: 4, tasks: 5 });
      } finally {
        publisher.release();
        await firstDone;
      }
    } else {
      // One writer: everything waits for `first`, then the queue drains in full batches of the batch size.
      publisher.release();
      await Promise.all([firstDone, ...queuedDone]);
      expect(await batchSizes(metrics)).toEqual({ transactions: 3, tasks: 5 });
    }
    const stored = await loadStatusSummaries(t.ctx, [first, ...queued]);
    expect([...stored.values()].map((s) => s.revision)).toEqual([1, 1, 1, 1, 1]);
    expect(publisher.summaries.map((u) => u.taskId).sort()).toEqual([first, ...queued].sort());
  });

  if (dialect === 'postgres') {
    it('keeps projecting while a COMMIT waits: tasks of a committing batch do not hold the places of the ones behind it', async () => {
      const [first, second, third] = [await taskWithQuestion(), await taskWithQuestion(), await taskWithQuestion()];
      // A deferred constraint trigger runs inside COMMIT: on `first`'s row it waits for an advisory
      // lock this test holds, so that transaction sits in COMMIT as on a slow WAL flush.
      const lockKey = Math.floor(Math.random() * 2 ** 31);
      await t.ctx.knex.raw(
        `CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock(${lockKey}); RETURN NULL; END $$`,
      );
      await t.ctx.knex.raw(
        `CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT OR UPDATE ON task_status_summaries DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.task_id = '${first}') EXECUTE FUNCTION hold_commit()`,
      );
      let unlock!: () => void;
      const unlocked = new Promise<void>((resolve) => (unlock = resolve));
      let locked!: () => void;
      const lockHeld = new Promise<void>((resolve) => (locked = resolve));
      const holder = t.ctx.knex.transaction(async (trx) => {
        await trx.raw('SELECT pg_advisory_xact_lock(?)', [lockKey]);
        locked();
        await unlocked;
      });
      try {
        await lockHeld;
        const publisher = new RecordingPublisher();
        // Batch size 1 and one slot: only counting the connections lets two more tasks in beside `first`.
        const projector = createTestProjector(t.ctx, { publisher, batchSize: 1, transactions: 1, connections: 3 });
        let firstSettled = false;
        const firstDone = projector.reproject(first).finally(() => (firstSettled = true));
        while (publisher.summaries.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
        const waited = new Promise((_, reject) => setTimeout(() => reject(new Error('the tasks behind a committing batch waited for its COMMIT')), 5000));
        await Promise.race([Promise.all([projector.reproject(second), projector.reproject(third)]), waited]);
        expect(firstSettled).toBe(false);
        expect([...(await loadStatusSummaries(t.ctx, [first, second, third])).keys()].sort()).toEqual([second, third].sort());
        unlock();
        await firstDone;
        expect((await loadStatusSummaries(t.ctx, [first])).get(first)?.revision).toBe(1);
      } finally {
        unlock();
        await holder;
        await t.ctx.knex.raw('DROP TRIGGER hold_commit ON task_status_summaries');
        await t.ctx.knex.raw('DROP FUNCTION hold_commit()');
      }
    });
  }
});
