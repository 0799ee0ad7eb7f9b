import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { TASK_SESSION_STATE_CHANGED } from '../../src/contract/kandevEvents.js';
import { MESSAGE_QUEUE_STATUS_CHANGED, PLAN_COMMENTS_CHANGED } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { rawRows } from '../../src/repository/context.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import { collectEvents } from '../support/busEvents.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { connectTestNats, deleteTopology, envelope, eventually, uniquePrefix } from '../support/nats.js';
import { seedPlanTask } from '../support/planComments.js';
import { createCommentsThrough, stageThrough } from '../support/clientFixtures.js';
import { promptsOnStream } from '../support/promptReceipts.js';
import { testWorkerConfig } from '../support/workerConfig.js';

/**
 * queue.remove and queue.clear through the typed client against a real worker, whose prompt
 * dispatcher runs: what a removal gives back (comments, attachments), what it publishes, what a
 * replay of the removed entry's enqueue answers, and a removal racing the dispatcher's deliveries.
 * Sessions are RUNNING unless a test lets the agent go idle, so the dispatcher leaves them alone.
 */
describeEachDialect('queue management over a real NATS on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let bus: ReturnType<typeof collectEvents>;

  async function seedComments(n: number) {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const comments = await createCommentsThrough(client, task, n);
    return { ...task, comments };
  }

  async function enqueue(sessionId: string, extra: Record<string, unknown> = {}) {
    const request = { session_id: sessionId, caller_id: randomUUID(), content: `prompt ${randomUUID()}`, ...extra };
    const reply = await client.enqueue(request);
    if (!reply.ok) throw new Error(JSON.stringify(reply));
    return { request, reply };
  }

  /** The agent finished its turn: Kandev sets the session IDLE and publishes the change, which kicks the dispatcher. */
  async function agentGoesIdle(taskId: string, sessionId: string) {
    await rawRows(t.ctx, `UPDATE task_sessions SET state = 'IDLE' WHERE id = ?`, [sessionId]);
    await jetstream(nc).publish(
      `${prefix}${TASK_SESSION_STATE_CHANGED}`,
      envelope(TASK_SESSION_STATE_CHANGED, { task_id: taskId, session_id: sessionId, old_state: 'RUNNING', new_state: 'IDLE' }),
    );
  }

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`queue_mgmt_${dialect}`);
    bus = collectEvents(nc, prefix, [PLAN_COMMENTS_CHANGED, MESSAGE_QUEUE_STATUS_CHANGED]);
    worker = await startWorker({ db: t.db, nc, config: testWorkerConfig(prefix, { queueMaxPerSession: 20 }), logger: silentLogger() });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    bus?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('queue.remove gives the comments back as they were and the attachment back to staged, publishes both events, and a replay of the enqueue says removed', async () => {
    const task = await seedComments(2);
    const before = await client.listPlanComments({ task_id: task.taskId });
    if (!before.ok) throw new Error(JSON.stringify(before));
    const staged = await stageThrough(client, task.workspaceId);
    const refs = task.comments.map((c) => ({ id: c.id, version: c.version }));
    const { request, reply } = await enqueue(task.sessionId, { plan_comment_refs: refs, attachment_ids: [staged.id], attachment_owner_id: staged.owner });
    const kept = await enqueue(task.sessionId);
    const listed = await client.listQueue({ session_id: task.sessionId });
    if (!listed.ok) throw new Error(JSON.stringify(listed));

    const removed = await client.removeQueueEntry({ session_id: task.sessionId, queue_id: reply.queue_id! });

    expect(removed).toMatchObject({
      ok: true,
      session_id: task.sessionId,
      task_id: task.taskId,
      removed: [{ queue_id: reply.queue_id, position: reply.position }],
      dropped_comment_ids: [],
      released_attachment_ids: [staged.id],
      revision: listed.revision + 1,
      count: 1,
    });
    if (!removed.ok) throw new Error(JSON.stringify(removed));
    expect([...removed.returned_comment_ids].sort()).toEqual(refs.map((r) => r.id).sort());
    // Same ids, bodies, selections, anchors and creation times; the revision moved past the consumption's.
    const after = await client.listPlanComments({ task_id: task.taskId });
    if (!after.ok) throw new Error(JSON.stringify(after));
    const shape = (c: object) => ({ ...c, updated_at: undefined });
    expect(after.plan_comments.comments.map(shape)).toEqual(before.plan_comments.comments.map(shape));
    expect(after.plan_comments.revision).toBe(before.plan_comments.revision + 2);
    expect(removed.plan_comments).toEqual(after.plan_comments);
    expect(await t.ctx.knex('task_message_attachments').where({ id: staged.id }).first()).toMatchObject({ state: 'staged', queue_id: '' });
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({
      count: 1,
      entries: [{ id: kept.reply.queue_id }],
      revision: removed.revision,
    });

    await eventually(
      () => bus.ofType(PLAN_COMMENTS_CHANGED).find((e) => e.data.task_id === task.taskId && e.data.revision === after.plan_comments.revision),
      10_000,
      'the collection event of the return',
    );
    const status = await eventually(
      () => bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).find((e) => e.data.session_id === task.sessionId && e.data.count === 1),
      10_000,
      'the queue status after the removal',
    );
    expect(status.data).toMatchObject({ session_id: task.sessionId, task_id: task.taskId, count: 1 });
    const jsm = await jetstreamManager(nc);
    const stored = await jsm.streams.getMessage(worker.topology.eventsStream, { last_by_subj: `${prefix}${MESSAGE_QUEUE_STATUS_CHANGED}` });
    expect(stored?.header.get('Nats-Msg-Id')).toBe(`message.queue.status_changed:${task.sessionId}:revision:${removed.revision}:1`);

    const replay = await client.enqueue(request);
    expect(replay).toMatchObject({ ok: true, replayed: true, status: 'removed', status_reason: '', queue_id: reply.queue_id });
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ count: 1 });
    // Removing it again: it is gone.
    expect(await client.removeQueueEntry({ session_id: task.sessionId, queue_id: reply.queue_id! })).toMatchObject({
      ok: false,
      error: { code: 'not_found' },
      reason: 'queue_entry_not_found',
    });
    // The returned comments can be sent again.
    expect((await enqueue(task.sessionId, { plan_comment_refs: refs })).reply).toMatchObject({ ok: true, replayed: false });
  });

  it('queue.clear removes every waiting entry, the summary counts 0, and an unknown session is not_found', async () => {
    const task = await seedComments(1);
    const only = task.comments[0]!;
    await enqueue(task.sessionId, { plan_comment_refs: [{ id: only.id, version: 1 }] });
    await enqueue(task.sessionId);
    await enqueue(task.sessionId);
    await eventually(async () => ((await storedCount(task.taskId)) === 3 ? true : undefined), 10_000, 'queued_prompt_count 3');

    const cleared = await client.clearQueue({ session_id: task.sessionId });
    expect(cleared).toMatchObject({ ok: true, count: 0, returned_comment_ids: [only.id] });
    expect(cleared.ok && cleared.removed).toHaveLength(3);
    await eventually(async () => ((await storedCount(task.taskId)) === 0 ? true : undefined), 10_000, 'queued_prompt_count 0');
    expect(await client.clearQueue({ session_id: task.sessionId })).toMatchObject({ ok: true, removed: [], count: 0 });
    expect(await client.clearQueue({ session_id: `no-${randomUUID()}` })).toMatchObject({
      ok: false,
      error: { code: 'not_found' },
      reason: 'session_not_found',
    });
    expect(await client.removeQueueEntry({ session_id: task.sessionId, queue_id: 'q' })).toMatchObject({ ok: false, reason: 'queue_entry_not_found' });
  });

  it('removals racing the dispatcher: every entry is delivered once or removed, never both, and none is lost', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await enqueue(task.sessionId)).reply.queue_id!);
    const removedIds: string[] = [];
    const refused: string[] = [];
    // The removals walk the queue from its tail while the agent keeps going idle, taking one prompt each time.
    const removing = (async () => {
      for (const id of [...ids].reverse()) {
        const reply = await client.removeQueueEntry({ session_id: task.sessionId, queue_id: id });
        if (reply.ok) removedIds.push(id);
        else refused.push(`${id}:${String(reply.reason)}`);
      }
    })();
    const delivering = (async () => {
      for (let round = 0; round < 8; round++) {
        await agentGoesIdle(task.taskId, task.sessionId);
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
    })();
    await Promise.all([removing, delivering]);
    // Quiet: nothing waits or is in flight any more (the last idle may still deliver one).
    await agentGoesIdle(task.taskId, task.sessionId);
    await eventually(
      async () => ((await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE session_id = ?`, [task.sessionId])).length === 0 ? true : undefined),
      20_000,
      'every entry delivered or removed',
    );
    const delivered = (await promptsOnStream(nc, prefix, task.sessionId)).map((p) => p.receiptId);
    expect(new Set(delivered).size).toBe(delivered.length);
    expect(delivered.filter((id) => id !== undefined && removedIds.includes(id))).toEqual([]);
    expect([...delivered, ...removedIds].sort()).toEqual([...ids].sort());
    // A refusal is only ever the entry being delivered or already gone.
    for (const r of refused) expect(r).toMatch(/:(entry_in_flight|queue_entry_not_found)$/);
    const outcomes = await rawRows<{ id: string; status: string }>(t.ctx, `SELECT id, status FROM pending_projector_prompt_outcomes WHERE session_id = ?`, [
      task.sessionId,
    ]);
    expect(outcomes.map((o) => o.id).sort()).toEqual([...removedIds].sort());
  });

  it('queue.update edits a waiting entry at its version and queue.reorder rewrites the order at its revision; each publishes the queue status', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const a = (await enqueue(task.sessionId)).reply.queue_id!;
    const b = (await enqueue(task.sessionId)).reply.queue_id!;
    const c = (await enqueue(task.sessionId)).reply.queue_id!;

    const updated = await client.updateQueueEntry({ session_id: task.sessionId, queue_id: b, version: 1, content: 'edited', plan_mode: true });
    expect(updated).toMatchObject({ ok: true, entry: { id: b, version: 2, content: 'edited', plan_mode: true }, released_attachment_ids: [] });
    expect(await client.updateQueueEntry({ session_id: task.sessionId, queue_id: b, version: 1, content: 'stale' })).toMatchObject({
      ok: false,
      error: { code: 'conflict' },
      reason: 'queue_changed',
      entries: [{ id: a }, { id: b, version: 2, content: 'edited' }, { id: c }],
    });
    expect(await client.updateQueueEntry({ session_id: task.sessionId, queue_id: b, version: 2 } as never)).toMatchObject({
      ok: false,
      error: { code: 'bad_request' },
    });
    await eventually(
      () => bus.ofType(MESSAGE_QUEUE_STATUS_CHANGED).find((e) => e.data.session_id === task.sessionId && e.data.count === 3),
      10_000,
      'the queue status after the edit',
    );

    const listed = await client.listQueue({ session_id: task.sessionId });
    if (!listed.ok) throw new Error(JSON.stringify(listed));
    const reordered = await client.reorderQueue({ session_id: task.sessionId, queue_ids: [c, a, b], revision: listed.revision });
    expect(reordered).toMatchObject({ ok: true, revision: listed.revision + 1, entries: [{ id: c }, { id: a }, { id: b }] });
    expect(await client.reorderQueue({ session_id: task.sessionId, queue_ids: [a, b, c], revision: listed.revision })).toMatchObject({
      ok: false,
      reason: 'queue_changed',
      revision: listed.revision + 1,
    });
    const jsm = await jetstreamManager(nc);
    await eventually(
      async () => {
        const stored = await jsm.streams.getMessage(worker.topology.eventsStream, { last_by_subj: `${prefix}${MESSAGE_QUEUE_STATUS_CHANGED}` });
        return stored?.header.get('Nats-Msg-Id') === `message.queue.status_changed:${task.sessionId}:revision:${listed.revision + 1}:3` ? true : undefined;
      },
      10_000,
      'the queue status after the reorder',
    );

    // The dispatcher delivers in the new order.
    await agentGoesIdle(task.taskId, task.sessionId);
    await eventually(async () => ((await promptsOnStream(nc, prefix, task.sessionId)).length === 1 ? true : undefined), 20_000, 'the first delivery');
    expect((await promptsOnStream(nc, prefix, task.sessionId)).map((p) => p.receiptId)).toEqual([c]);
  });

  it('reorders racing the dispatcher: each delivery follows the order committed before it, and nothing is delivered twice or lost', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await enqueue(task.sessionId)).reply.queue_id!);
    const reordering = (async () => {
      for (let round = 0; round < 12; round++) {
        const listed = await client.listQueue({ session_id: task.sessionId });
        if (!listed.ok || listed.entries.length < 2) return;
        const reply = await client.reorderQueue({
          session_id: task.sessionId,
          queue_ids: listed.entries.map((e) => e.id).reverse(),
          revision: listed.revision,
        });
        if (!reply.ok) expect(reply).toMatchObject({ reason: 'queue_changed' });
      }
    })();
    const delivering = (async () => {
      for (let round = 0; round < 6; round++) {
        await agentGoesIdle(task.taskId, task.sessionId);
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
    })();
    await Promise.all([reordering, delivering]);
    for (let round = 0; round < 6; round++) {
      await agentGoesIdle(task.taskId, task.sessionId);
      const left = await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE session_id = ?`, [task.sessionId]);
      if (left.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await eventually(
      async () => ((await rawRows(t.ctx, `SELECT id FROM queued_messages WHERE session_id = ?`, [task.sessionId])).length === 0 ? true : undefined),
      20_000,
      'every entry delivered',
    );
    const delivered = (await promptsOnStream(nc, prefix, task.sessionId)).map((p) => p.receiptId);
    expect([...delivered].sort()).toEqual([...ids].sort());
  });

  it('pause, then drain, then resume: a paused idle session gets nothing but the one drained head, and a resume delivers the rest', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'RUNNING' });
    const paused = await client.setQueueAutoRun({ session_id: task.sessionId, auto_run: false });
    expect(paused).toMatchObject({ ok: true, session_id: task.sessionId, task_id: task.taskId, auto_run: false });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await enqueue(task.sessionId)).reply.queue_id!);
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ ok: true, count: 3, auto_run: false });

    // Idle, and polled: a paused queue still waits, and still counts.
    await agentGoesIdle(task.taskId, task.sessionId);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await worker.promptsIdle();
    expect(await promptsOnStream(nc, prefix, task.sessionId)).toEqual([]);
    await eventually(async () => ((await storedCount(task.taskId)) === 3 ? true : undefined), 10_000, 'paused entries still counted');

    const drained = await client.drainQueue({ session_id: task.sessionId });
    expect(drained).toMatchObject({ ok: true, session_id: task.sessionId, queue_id: ids[0], delivery: 'acknowledged' });
    expect((await promptsOnStream(nc, prefix, task.sessionId)).map((p) => p.receiptId)).toEqual([ids[0]]);
    // The delivery made the agent busy: a second drain cannot deliver, and nothing else went.
    expect(await client.drainQueue({ session_id: task.sessionId })).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'session_unavailable' });
    await agentGoesIdle(task.taskId, task.sessionId);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await promptsOnStream(nc, prefix, task.sessionId)).toHaveLength(1);

    expect(await client.setQueueAutoRun({ session_id: task.sessionId, auto_run: true })).toMatchObject({ ok: true, auto_run: true });
    await eventually(async () => ((await promptsOnStream(nc, prefix, task.sessionId)).length === 2 ? true : undefined), 20_000, 'the resume delivering');
    expect((await promptsOnStream(nc, prefix, task.sessionId)).map((p) => p.receiptId)).toEqual([ids[0], ids[1]]);
    expect(await client.listQueue({ session_id: task.sessionId })).toMatchObject({ ok: true, auto_run: true, entries: [{ id: ids[2] }] });
    expect(await client.setQueueAutoRun({ session_id: `no-${randomUUID()}`, auto_run: true })).toMatchObject({ ok: false, reason: 'session_not_found' });
  });

  it('a drain of an empty queue is queue_empty, and a paused session still takes a direct send', async () => {
    const task = await seedPlanTask(t.ctx, { sessionState: 'IDLE' });
    expect(await client.setQueueAutoRun({ session_id: task.sessionId, auto_run: false })).toMatchObject({ ok: true });
    expect(await client.drainQueue({ session_id: task.sessionId })).toMatchObject({ ok: false, reason: 'queue_empty' });
    const sent = await client.sendMessage({ session_id: task.sessionId, caller_id: randomUUID(), content: 'now, not queued' });
    if (!sent.ok) throw new Error(JSON.stringify(sent));
    await eventually(async () => ((await promptsOnStream(nc, prefix, task.sessionId)).length === 1 ? true : undefined), 20_000, 'the direct send');
  });

  /** The stored summary's `queued_prompt_count`, read through summary.get. */
  async function storedCount(taskId: string): Promise<number | undefined> {
    const reply = await client.getSummary({ task_id: taskId });
    return reply.ok ? Number((reply as unknown as { status_summary: Record<string, unknown> }).status_summary.queued_prompt_count ?? 0) : undefined;
  }
});
