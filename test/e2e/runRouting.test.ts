import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { TASK_SESSION_STATE_CHANGED } from '../../src/contract/kandevEvents.js';
import { topologyFor } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { createSession } from '../../src/repository/tasks/tasks.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { testWorkerConfig } from '../support/workerConfig.js';

/**
 * Run routing through a real worker: `plan_comment.run` to an idle primary goes direct; to a busy
 * one it queues an entry guarded to that primary, delivered once the primary goes idle, or, if
 * another session was promoted before, cancelled with `primary_session_changed` and its comments
 * back. Run sets plan mode unless told otherwise; `message.send` takes `plan_mode` and `model`.
 * Prompts are counted as a plain subscriber of the agent's subject receives them.
 */
describeEachDialect('Run routing over a real NATS on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`run_routing_${dialect}`);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { dispatchPollMs: 500 }), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  /** Every prompt a plain subscriber of the session's agent subject receives. */
  function agent(sessionId: string) {
    const sub = nc.subscribe(topologyFor(prefix).agentPromptSubject(sessionId));
    const received: Array<Record<string, unknown>> = [];
    void (async () => {
      for await (const m of sub) received.push((m.json() as { data: Record<string, unknown> }).data);
    })();
    return { received, stop: () => sub.unsubscribe() };
  }

  async function seedRun(primaryState: string) {
    const task = await seedPlanTask(t.ctx, { sessionState: primaryState });
    const created = await client.createPlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: `c-${randomUUID()}`, body: 'Rename step 2.' });
    if (!created.ok) throw new Error(JSON.stringify(created));
    return { ...task, ref: { id: created.comment!.id, version: created.comment!.version } };
  }

  async function setState(taskId: string, sessionId: string, from: string, to: string) {
    await t.ctx.knex('task_sessions').where({ id: sessionId }).update({ state: to });
    await jetstream(nc).publish(
      `${prefix}${TASK_SESSION_STATE_CHANGED}`,
      envelope(TASK_SESSION_STATE_CHANGED, { task_id: taskId, session_id: sessionId, old_state: from, new_state: to }),
    );
  }

  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('Run to an idle primary goes direct, in plan mode unless the request says otherwise', async () => {
    const task = await seedRun('IDLE');
    const prompts = agent(task.sessionId);
    try {
      const run = await client.runPlanComments({ task_id: task.taskId, caller_id: randomUUID(), plan_comment_refs: [task.ref], content: 'Apply.' });
      expect(run).toMatchObject({ ok: true, delivery_kind: 'direct', session_id: task.sessionId });
      await eventually(() => (prompts.received.length === 1 ? true : undefined), 10_000, 'the direct Run');
      expect(prompts.received[0]).toMatchObject({ plan_mode: true });
    } finally {
      prompts.stop();
    }
  });

  it('Run to a busy primary queues an entry delivered once to that primary when it goes idle; a resend replays it', async () => {
    const task = await seedRun('RUNNING');
    const prompts = agent(task.sessionId);
    try {
      const request = { task_id: task.taskId, caller_id: randomUUID(), plan_comment_refs: [task.ref], content: 'Apply.', plan_mode: false, model: 'opus' };
      const run = await client.runPlanComments(request);
      expect(run).toMatchObject({ ok: true, delivery_kind: 'queued', status: 'waiting', session_id: task.sessionId, queue_id: request.caller_id });
      expect(await client.runPlanComments(request)).toMatchObject({ ok: true, replayed: true, delivery_kind: 'queued', status: 'waiting' });
      await pause(1_000);
      expect(prompts.received).toHaveLength(0);

      await setState(task.taskId, task.sessionId, 'RUNNING', 'IDLE');
      await eventually(() => (prompts.received.length === 1 ? true : undefined), 10_000, 'the queued Run');
      expect(prompts.received[0]).toMatchObject({ plan_mode: false, model: 'opus' });
      expect(String(prompts.received[0]!.content)).toContain('Rename step 2.');
      await setState(task.taskId, task.sessionId, 'RUNNING', 'IDLE');
      await pause(1_500);
      expect(prompts.received).toHaveLength(1);
      expect(await client.runPlanComments(request)).toMatchObject({ ok: true, replayed: true, status: 'delivered' });
    } finally {
      prompts.stop();
    }
  });

  it('a queued Run whose primary was replaced before it went idle is cancelled with primary_session_changed, its comments back', async () => {
    const task = await seedRun('RUNNING');
    const prompts = agent(task.sessionId);
    try {
      const request = { task_id: task.taskId, caller_id: randomUUID(), plan_comment_refs: [task.ref], content: 'Apply.' };
      expect(await client.runPlanComments(request)).toMatchObject({ ok: true, delivery_kind: 'queued' });
      const after = await client.listPlanComments({ task_id: task.taskId });
      expect(after.ok && after.plan_comments.comments).toEqual([]);

      // Another session is promoted; the old primary then goes idle.
      const other = await createSession(t.ctx, { taskId: task.taskId, state: 'RUNNING', isPrimary: true });
      await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ is_primary: 0 });
      await setState(task.taskId, task.sessionId, 'RUNNING', 'IDLE');

      await eventually(
        async () => {
          const replay = await client.runPlanComments(request);
          return replay.ok && replay.status === 'cancelled' ? replay : undefined;
        },
        10_000,
        'the cancellation',
      ).then((replay) => expect(replay).toMatchObject({ status_reason: 'primary_session_changed' }));
      const back = await client.listPlanComments({ task_id: task.taskId });
      expect(back.ok && back.plan_comments.comments.map((c) => c.id)).toEqual([task.ref.id]);
      expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ count: 0 });
      await pause(1_000);
      expect(prompts.received).toHaveLength(0);
      expect(other.id).not.toBe(task.sessionId);
    } finally {
      prompts.stop();
    }
  });

  it('message.send takes plan_mode and model', async () => {
    const task = await seedRun('IDLE');
    const prompts = agent(task.sessionId);
    try {
      const sent = await client.sendMessage({ session_id: task.sessionId, caller_id: randomUUID(), content: 'Hello', plan_mode: true, model: 'sonnet' });
      expect(sent).toMatchObject({ ok: true, delivery_kind: 'direct' });
      await eventually(() => (prompts.received.length === 1 ? true : undefined), 10_000, 'the send');
      expect(prompts.received[0]).toMatchObject({ plan_mode: true, model: 'sonnet' });
    } finally {
      prompts.stop();
    }
  });
});
