import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { TASK_SESSION_STATE_CHANGED } from '../../src/contract/kandevEvents.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, topologyFor } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { rawRows } from '../../src/repository/context.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { collectEvents } from '../support/busEvents.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { promptsOnStream } from '../support/promptReceipts.js';
import { collectSummaries } from '../support/summaries.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const DISPATCH_POLL_MS = 1_000;

/**
 * The whole queue path through a worker: prompts queued while the agent works wait, untouched; each
 * time the agent finishes (Kandev sets the session IDLE and publishes `task_session.state_changed`)
 * the dispatcher delivers the next one, in FIFO order, each exactly once, and claims the session
 * RUNNING, so the rest wait for the next IDLE. `queue.list` and the summary's `queued_prompt_count`
 * follow each delivery, and the count is omitted once the queue is empty.
 */
describeEachDialect('a queue drained through a worker on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let summaries: ReturnType<typeof collectSummaries>;
  let bus: ReturnType<typeof collectEvents>;

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`qdrain_${dialect}`);
    summaries = collectSummaries(nc, prefix);
    bus = collectEvents(nc, prefix, [MESSAGE_QUEUE_STATUS_CHANGED, TASK_SESSION_STATE_CHANGED]);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { dispatchPollMs: DISPATCH_POLL_MS }), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    summaries?.stop();
    bus?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  const sessionState = async (sessionId: string) => String((await t.ctx.knex('task_sessions').where({ id: sessionId }).first()).state);
  const storedCount = async (taskId: string) => {
    const reply = await client.getSummary({ task_id: taskId });
    if (!reply.ok) throw new Error(JSON.stringify(reply));
    return (reply as unknown as { status_summary: Record<string, unknown> }).status_summary.queued_prompt_count;
  };
  /** The delivery label of the transcript message `id` once its receipt was settled (deleted and labelled). */
  const settled = (id: string) =>
    eventually(
      async () => {
        if ((await rawRows(t.ctx, 'SELECT id FROM queued_messages WHERE id = ?', [id])).length > 0) return undefined;
        const message = await t.ctx.knex('task_session_messages').where({ id }).first();
        return message ? (JSON.parse(String(message.metadata)).prompt_delivery as string | undefined) : undefined;
      },
      20_000,
      `the settlement of receipt ${id}`,
    );
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('three prompts queued on a RUNNING session go out one per IDLE, FIFO, each exactly once; the count follows them and is omitted at 0', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    // The agent: every prompt published to it, in arrival order.
    const sub: Subscription = nc.subscribe(topologyFor(prefix).agentPromptSubject(task.sessionId));
    const received: Array<Record<string, unknown>> = [];
    void (async () => {
      for await (const m of sub) received.push((m.json() as { data: Record<string, unknown> }).data);
    })();

    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const callerId = randomUUID();
      const reply = await client.enqueue({ session_id: task.sessionId, caller_id: callerId, content: `prompt ${i}` });
      if (!reply.ok) throw new Error(JSON.stringify(reply));
      expect(reply).toMatchObject({ replayed: false, queue_id: callerId, delivery_kind: 'queued', delivery: 'pending' });
      ids.push(callerId);
    }
    const listed = await client.listQueue({ session_id: task.sessionId });
    if (!listed.ok) throw new Error(JSON.stringify(listed));
    expect(listed).toMatchObject({ count: 3 });
    expect(listed.entries.map((e) => e.id)).toEqual(ids);
    await eventually(
      () => summaries.forTask(task.taskId).find((e) => e.status_summary.queued_prompt_count === 3),
      20_000,
      'a summary counting 3 queued prompts',
    );
    // The summary reaches the bus before its COMMIT (ADR 0004): the stored row follows a moment later.
    await eventually(async () => ((await storedCount(task.taskId)) === 3 ? true : undefined), 10_000, 'the stored summary counting 3');

    // While the agent works, polls and kicks deliver nothing.
    await pause(DISPATCH_POLL_MS + 300);
    expect(received).toEqual([]);
    expect(await promptsOnStream(nc, prefix, task.sessionId)).toEqual([]);
    expect(await sessionState(task.sessionId)).toBe('RUNNING');

    for (let i = 0; i < 3; i++) {
      // The agent finished its turn: Kandev sets the session IDLE and says so.
      await rawRows(t.ctx, `UPDATE task_sessions SET state = 'IDLE' WHERE id = ?`, [task.sessionId]);
      await jetstream(nc).publish(
        `${prefix}${TASK_SESSION_STATE_CHANGED}`,
        envelope(TASK_SESSION_STATE_CHANGED, { task_id: task.taskId, session_id: task.sessionId, old_state: 'RUNNING', new_state: 'IDLE' }),
      );
      await eventually(() => (received.length > i ? true : undefined), 20_000, `prompt ${i} on the agent's subject`);
      expect(received[i]).toMatchObject({
        receipt_id: ids[i],
        caller_id: ids[i],
        message_id: ids[i],
        session_id: task.sessionId,
        task_id: task.taskId,
        delivery_kind: 'queued',
        content: `prompt ${i}`,
        prompt_seq: i + 1,
      });
      expect(await settled(ids[i]!)).toBe('acknowledged');
      // Claimed RUNNING by the delivery (the marker's transaction, before the publish).
      expect(await sessionState(task.sessionId)).toBe('RUNNING');

      const remaining = 2 - i;
      const queue = await client.listQueue({ session_id: task.sessionId });
      if (!queue.ok) throw new Error(JSON.stringify(queue));
      expect(queue.count).toBe(remaining);
      expect(queue.entries.map((e) => e.id)).toEqual(ids.slice(i + 1));
      await eventually(
        async () => ((await storedCount(task.taskId)) === (remaining > 0 ? remaining : undefined) ? true : undefined),
        20_000,
        `a stored count of ${remaining}`,
      );
      // Nothing more until the next IDLE, not even at the next poll.
      await pause(DISPATCH_POLL_MS + 300);
      expect(received).toHaveLength(i + 1);
    }

    sub.unsubscribe();
    const stored = await promptsOnStream(nc, prefix, task.sessionId);
    expect(stored.map((p) => p.receiptId)).toEqual(ids);
    expect(stored.map((p) => p.data.content)).toEqual(['prompt 0', 'prompt 1', 'prompt 2']);
    expect(received.map((p) => p.receipt_id)).toEqual(ids);
    expect(await rawRows(t.ctx, 'SELECT id FROM queued_messages WHERE session_id = ?', [task.sessionId])).toEqual([]);
    // Each delivery claimed the session once, from the IDLE Kandev set.
    const claims = bus.ofType(TASK_SESSION_STATE_CHANGED).filter((e) => e.source === 'pending-projector' && e.data.session_id === task.sessionId);
    expect(claims.map((e) => e.data)).toEqual(
      Array.from({ length: 3 }, () => ({ task_id: task.taskId, session_id: task.sessionId, old_state: 'IDLE', new_state: 'RUNNING' })),
    );

    expect(await storedCount(task.taskId)).toBeUndefined();
    await eventually(
      () => {
        const latest = summaries.latest(task.taskId)?.status_summary;
        return latest && !('queued_prompt_count' in latest) ? latest : undefined;
      },
      20_000,
      'a published summary without queued_prompt_count',
    );
    const lastStatus = bus
      .ofType(MESSAGE_QUEUE_STATUS_CHANGED)
      .filter((e) => e.data.session_id === task.sessionId)
      .at(-1);
    expect(lastStatus?.data).toEqual({
      session_id: task.sessionId,
      task_id: task.taskId,
      entries: [],
      count: 0,
      max: 10,
      auto_run: true,
      merge_enabled: false,
    });
    // Four fixed pauses of a poll interval and three deliveries: more than the default 30 s can hold on a loaded host.
  }, 90_000);
});
