import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { TASK_SESSION_STATE_CHANGED, TASK_UPDATED } from '../../src/contract/kandevEvents.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, PLAN_COMMENTS_CHANGED } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { collectEvents } from '../support/busEvents.js';
import { runCli } from '../support/cliProcess.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

/**
 * No queue entry outlives its session, through a real worker: a session that ends and a task that
 * is archived have their waiting entries cancelled on the event that says so (the count reaches 0,
 * the comments come back, a replay says cancelled with the reason); a change whose event never
 * came is caught by the reconciliation pass; and with no worker running, `verify` reports such
 * entries and `reconcile` cancels them.
 */
describeEachDialect('queues of finished sessions over a real NATS on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle | undefined;
  let prefix: string;
  let client: PendingProjectorClient;
  let bus: ReturnType<typeof collectEvents>;
  let summaries: ReturnType<typeof collectSummaries>;
  const TTL_MS = 1500;

  async function seedQueue(entries: number) {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const created = await client.createPlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: `c-${randomUUID()}`, body: 'Rename step 2.' });
    if (!created.ok) throw new Error(JSON.stringify(created));
    const requests = [];
    for (let i = 0; i < entries; i++) {
      const refs = i === 0 ? [{ id: created.comment!.id, version: created.comment!.version }] : [];
      const request = { session_id: task.sessionId, caller_id: randomUUID(), content: `prompt ${i}`, plan_comment_refs: refs };
      const reply = await client.enqueue(request);
      if (!reply.ok) throw new Error(JSON.stringify(reply));
      requests.push(request);
    }
    await eventually(
      () => (summaries.latest(task.taskId)?.status_summary.queued_prompt_count === entries ? true : undefined),
      10_000,
      'the count of the seeded queue',
    );
    return { ...task, commentId: created.comment!.id, requests };
  }

  async function expectCancelled(task: Awaited<ReturnType<typeof seedQueue>>, reason: string) {
    await eventually(
      () => ((summaries.latest(task.taskId)?.status_summary.queued_prompt_count ?? 0) === 0 ? true : undefined),
      10_000,
      'the count back to 0 (omitted)',
    );
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ ok: true, count: 0, entries: [] });
    const comments = await client.listPlanComments({ task_id: task.taskId });
    expect(comments.ok && comments.plan_comments.comments.map((c) => c.id)).toEqual([task.commentId]);
    for (const request of task.requests) {
      expect(await client.enqueue(request)).toMatchObject({ ok: true, replayed: true, status: 'cancelled', status_reason: reason });
    }
    await eventually(
      () => bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).find((e) => e.data.session_id === task.sessionId && e.data.count === 0),
      10_000,
      'the queue status after the cancellation',
    );
    await eventually(
      () => bus.ofType(PLAN_COMMENTS_CHANGED).find((e) => e.data.task_id === task.taskId && (e.data.comments as unknown[]).length === 1),
      10_000,
      'the collection event of the return',
    );
  }

  const publish = (type: string, data: Record<string, unknown>) => jetstream(nc).publish(`${prefix}${type}`, envelope(type, data));

  beforeAll(async () => {
    t = await openTestDatabase(dialect, undefined, { file: true });
    nc = await connectTestNats();
    prefix = uniquePrefix(`queue_lifecycle_${dialect}`);
    bus = collectEvents(nc, prefix, [PLAN_COMMENTS_CHANGED, MESSAGE_QUEUE_STATUS_CHANGED]);
    summaries = collectSummaries(nc, prefix);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { reservationTtlMs: TTL_MS }), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    bus?.stop();
    summaries?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('a session that completes has its waiting entries cancelled on the state change', async () => {
    const task = await seedQueue(2);
    await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state: 'COMPLETED' });
    await publish(TASK_SESSION_STATE_CHANGED, { task_id: task.taskId, session_id: task.sessionId, old_state: 'RUNNING', new_state: 'COMPLETED' });
    await expectCancelled(task, 'session_completed');
  });

  it('an archived task has its waiting entries cancelled on task.updated', async () => {
    const task = await seedQueue(2);
    await t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: t.ctx.clock() });
    await publish(TASK_UPDATED, { task_id: task.taskId });
    await expectCancelled(task, 'task_archived');
  });

  it('a session that failed without an event is caught by the next reconciliation pass', async () => {
    const task = await seedQueue(1);
    await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state: 'FAILED' });
    await expectCancelled(task, 'session_failed');
  });

  it('with no worker running, verify reports an entry left waiting for a finished session and reconcile cancels it', async () => {
    const task = await seedQueue(2);
    await worker!.stop();
    worker = undefined;
    await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state: 'CANCELLED' });

    const before = await runCli(['verify', '--database-url', t.url]);
    expect(before.stdout).toContain(`${task.taskId}\tfinished_queue\tsession=${task.sessionId}\treason=session_cancelled\twaiting=2`);
    expect(before.stderr).toMatch(/2 queue entries of 1 finished session still waiting \(reconcile cancels them\)/);
    expect(before.status).toBe(1);

    const repaired = await runCli(['reconcile', '--database-url', t.url, '--nats-url', natsUrl(), '--subject-prefix', prefix]);
    expect(repaired.stdout).toContain('cancelled 2 waiting queue entries of 1 finished session');
    expect(repaired.status).toBe(0);
    // The endpoints that show what the cancellation left need a worker again.
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { reservationTtlMs: TTL_MS }), logger: silentLogger() });
    await expectCancelled(task, 'session_cancelled');
    await worker.stop();
    worker = undefined;

    const after = await runCli(['verify', '--database-url', t.url]);
    expect(after.stdout).toBe('');
    expect(after.status).toBe(0);
  });
});
