import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { TASK_PLAN_DELETED } from '../../src/contract/kandevEvents.js';
import { PLAN_COMMENTS_CHANGED } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { rawRows, type RepositoryContext } from '../../src/repository/context.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { collectEvents } from '../support/busEvents.js';
import type { TestDatabase } from '../support/databases.js';
import { createKandevPlanTables } from '../support/kandevPlanSchema.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { describeEachSchemaAndDialect, openSchemaDatabase, rowWriter, serviceContext, type RowWriter } from '../support/rowWriters.js';
import { testWorkerConfig } from '../support/workerConfig.js';

/** Every table a plan deletion could touch, Kandev's plan tables and this service's own ledgers. */
const PLAN_TABLES = ['tasks', 'task_plans', 'task_plan_comments', 'task_plan_comment_admissions'] as const;

/**
 * `plan.delete` through a real worker in both schema modes. Beside Kandev's tables the plan is
 * Kandev's: the endpoint is refused before any statement and publishes nothing (Kandev's plan
 * service deletes plans, keeps their revisions and publishes `task_plan.deleted` itself). In owned
 * mode the plan goes, and Kandev's `task_plan.deleted` carries the deleted row.
 */
describeEachSchemaAndDialect('plan.delete by schema mode on %s', (dialect, schema) => {
  let t: TestDatabase;
  let ctx: RepositoryContext;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let bus: ReturnType<typeof collectEvents>;
  let w: RowWriter;

  /** A plan row as Kandev's plan service writes one (its timestamp text on SQLite), with an implementation started. */
  async function kandevPlan(taskId: string, sessionId: string): Promise<string> {
    const id = randomUUID();
    const kandevText = dialect === 'sqlite' ? '2026-09-01 10:00:00.123456789+00:00' : '2026-09-01 10:00:00.123456';
    const instant = schema === 'kandev' ? kandevText : '2026-09-01T10:00:00.123Z';
    await ctx.knex('task_plans').insert({
      id,
      task_id: taskId,
      title: 'Migration plan',
      content: '# Plan\n1. migrate\n2. test',
      created_by: 'agent',
      created_at: instant,
      updated_at: instant,
      implementation_started_at: instant,
      implementation_started_session_id: sessionId,
      implementation_started_by: 'user',
      comments_revision: 0,
    });
    return id;
  }

  async function planTables(): Promise<Record<string, unknown[]>> {
    const rows: Record<string, unknown[]> = {};
    for (const table of PLAN_TABLES) rows[table] = await rawRows(ctx, `SELECT * FROM ${table} ORDER BY id`);
    return rows;
  }

  beforeAll(async () => {
    t = await openSchemaDatabase(dialect, schema, { file: true });
    if (schema === 'kandev') await createKandevPlanTables(t.db);
    nc = await connectTestNats();
    prefix = uniquePrefix(`plandel_${dialect}_${schema}`);
    bus = collectEvents(nc, prefix, [TASK_PLAN_DELETED, PLAN_COMMENTS_CHANGED]);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix), logger: silentLogger() });
    ctx = await serviceContext(t, schema);
    w = rowWriter(schema, ctx);
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    bus?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  if (schema === 'kandev') {
    it("refuses plan.delete with plan_owned_by_kandev, naming Kandev's plan deletion, and deletes, writes and publishes nothing", async () => {
      const { taskId, sessionId } = await w.session({ state: 'IDLE' });
      const planId = await kandevPlan(taskId, sessionId);
      const comment = await client.createPlanComment({ task_id: taskId, plan_id: planId, comment_id: randomUUID(), body: 'split step 2' });
      if (!comment.ok) throw new Error(JSON.stringify(comment));
      await eventually(() => bus.about('task_id', taskId).find((e) => e.type === PLAN_COMMENTS_CHANGED), 10_000, 'the create event');
      const before = await planTables();
      const eventsBefore = bus.about('task_id', taskId).length;

      const refused = await client.deletePlan({ task_id: taskId, plan_id: planId });
      expect(refused).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'plan_owned_by_kandev' });
      const message = (refused as { error: { message: string } }).error.message;
      expect(message).toContain(`plan ${planId} of task ${taskId} is Kandev's`);
      expect(message).toMatch(/Kandev's plan service, which deletes the plan row, keeps its revisions and publishes task_plan\.deleted/);
      // Refused whatever the ids: nothing is read to answer it.
      expect(await client.deletePlan({ task_id: taskId, plan_id: 'not-the-plan' })).toMatchObject({ ok: false, reason: 'plan_owned_by_kandev' });
      expect(await client.deletePlan({ task_id: 'no-such-task', plan_id: planId })).toMatchObject({ ok: false, reason: 'plan_owned_by_kandev' });

      expect(await planTables()).toEqual(before);
      expect(await client.listPlanComments({ task_id: taskId })).toMatchObject({ ok: true, plan_comments: { plan_id: planId, revision: 1 } });
      // A round trip through the worker's publisher after the refusals: an event they issued would have arrived before this one.
      const later = await client.createPlanComment({ task_id: taskId, plan_id: planId, comment_id: randomUUID(), body: 'and step 3' });
      if (!later.ok) throw new Error(JSON.stringify(later));
      await eventually(() => bus.about('task_id', taskId).find((e) => e.data.revision === 2), 10_000, 'the second create event');
      expect(
        bus
          .about('task_id', taskId)
          .slice(eventsBefore)
          .map((e) => [e.type, e.data.revision]),
      ).toEqual([[PLAN_COMMENTS_CHANGED, 2]]);
      expect(bus.ofType(TASK_PLAN_DELETED)).toEqual([]);
    });
  } else {
    it("deletes the plan and its comments, then publishes Kandev's task_plan.deleted with the deleted plan's fields", async () => {
      const { taskId, sessionId } = await w.session({ state: 'IDLE' });
      const planId = await kandevPlan(taskId, sessionId);
      const plan = (await rawRows<Record<string, unknown>>(ctx, 'SELECT * FROM task_plans WHERE id = ?', [planId]))[0]!;
      const comment = await client.createPlanComment({ task_id: taskId, plan_id: planId, comment_id: randomUUID(), body: 'split step 2' });
      if (!comment.ok) throw new Error(JSON.stringify(comment));

      const deleted = await client.deletePlan({ task_id: taskId, plan_id: planId });
      expect(deleted).toEqual({ ok: true, deleted: true, plan_comments: { task_id: taskId, plan_id: null, revision: 0, comments: [] } });
      expect(await rawRows(ctx, 'SELECT id FROM task_plans WHERE task_id = ?', [taskId])).toEqual([]);
      expect(await rawRows(ctx, 'SELECT id FROM task_plan_comments WHERE task_id = ?', [taskId])).toEqual([]);

      const event = await eventually(() => bus.ofType(TASK_PLAN_DELETED).find((e) => e.data.task_id === taskId), 10_000, 'the task_plan.deleted event');
      expect(event.subject).toBe(`${prefix}${TASK_PLAN_DELETED}`);
      expect(event.source).toBe('pending-projector');
      const at = new Date('2026-09-01T10:00:00.123Z').getTime();
      expect(event.data).toMatchObject({
        id: planId,
        task_id: taskId,
        title: 'Migration plan',
        content: '# Plan\n1. migrate\n2. test',
        created_by: 'agent',
        implementation_started_session_id: sessionId,
        implementation_started_by: 'user',
        // The create's bump: the row as it was when deleted.
        comments_revision: 1,
      });
      for (const key of ['created_at', 'updated_at', 'implementation_started_at']) {
        expect(Math.floor(new Date(event.data[key] as string).getTime())).toBe(at);
      }
      // Every column of the row is in the event.
      expect(Object.keys(event.data).sort()).toEqual(Object.keys(plan).sort());

      // A repeat deletes nothing and publishes no second event.
      expect(await client.deletePlan({ task_id: taskId, plan_id: planId })).toMatchObject({ ok: true, deleted: false });
      const other = await w.session({ state: 'IDLE' });
      const otherPlan = await kandevPlan(other.taskId, other.sessionId);
      expect(await client.deletePlan({ task_id: other.taskId, plan_id: otherPlan })).toMatchObject({ ok: true, deleted: true });
      await eventually(() => bus.ofType(TASK_PLAN_DELETED).find((e) => e.data.task_id === other.taskId), 10_000, 'the second plan event');
      expect(bus.ofType(TASK_PLAN_DELETED).filter((e) => e.data.task_id === taskId)).toHaveLength(1);
    });
  }
});
