import { expect, it } from 'vitest';
import { getPromptOutcome } from '../../src/repository/prompts/promptOutcomes.js';
import { describeEachDialect } from '../support/databases.js';
import { seedPlanTask, type PlanTask } from '../support/planComments.js';
import { useQueueFixtures } from '../support/queueFixtures.js';

describeEachDialect('cancelling the queues of finished sessions on %s', (dialect) => {
  const f = useQueueFixtures(dialect);
  const { comment, queued, enqueue } = f;

  const setSession = (task: PlanTask, state: string) => f.t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state });
  const commentIds = async (taskId: string) =>
    (await f.t.ctx.knex('task_plan_comments').select('id').where({ task_id: taskId }).orderBy('id')).map((r) => r.id);

  it.each([
    ['COMPLETED', 'session_completed'],
    ['FAILED', 'session_failed'],
    ['CANCELLED', 'session_cancelled'],
  ])('a session that is %s has its waiting entries cancelled with reason %s, comments back', async (state, reason) => {
    const task = await seedPlanTask(f.t.ctx, { sessionState: 'RUNNING' });
    const ref = await comment(task, 'Rename step 2.');
    const input = queued(task, { planCommentRefs: [ref] });
    const first = await enqueue(input);
    const second = await enqueue(queued(task));
    expect(await f.store.listFinishedQueues({ sessionId: task.sessionId })).toEqual([]);

    await setSession(task, state);
    expect(await f.store.listFinishedQueues({ sessionId: task.sessionId })).toEqual([{ sessionId: task.sessionId, taskId: task.taskId, reason, waiting: 2 }]);
    expect(await f.store.listFinishedQueues({ taskId: task.taskId })).toHaveLength(1);
    expect((await f.store.listFinishedQueues('all')).map((q) => q.sessionId)).toContain(task.sessionId);

    const cancelled = await f.store.cancelFinishedQueue(task.taskId, task.sessionId);
    expect(cancelled).toMatchObject({ ok: true, reasons: [reason], count: 0, returnedCommentIds: [ref.id], droppedCommentIds: [] });
    expect(cancelled.ok && cancelled.withdrawn.map((w) => w.id)).toEqual([first, second]);
    expect(await commentIds(task.taskId)).toEqual([ref.id]);
    expect((await f.receipts.queueStatus(task.sessionId)).entries.length).toBe(0);
    expect(await getPromptOutcome(f.t.ctx, first)).toMatchObject({ status: 'cancelled', reason });
    expect(await f.store.acceptPrompt(input)).toMatchObject({ ok: true, replayed: true, status: 'cancelled', statusReason: reason });
    expect(await f.store.listFinishedQueues('all')).not.toContainEqual(expect.objectContaining({ sessionId: task.sessionId }));
  });

  it('an archived task has every session queue cancelled; an unarchived one keeps its entries', async () => {
    const task = await seedPlanTask(f.t.ctx, { sessionState: 'RUNNING' });
    await enqueue(queued(task));
    expect(await f.store.listFinishedQueues({ taskId: task.taskId })).toEqual([]);

    await f.t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: f.t.ctx.clock() });
    const [finished] = await f.store.listFinishedQueues({ taskId: task.taskId });
    expect(finished).toMatchObject({ reason: 'task_archived', waiting: 1 });
    // Unarchived between the listing and the cancellation: the transaction rereads and leaves it.
    await f.t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: null });
    expect(await f.store.cancelFinishedQueue(task.taskId, task.sessionId)).toMatchObject({ ok: true, reasons: [], withdrawn: [], count: 1 });

    await f.t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: f.t.ctx.clock() });
    expect(await f.store.cancelFinishedQueue(task.taskId, task.sessionId)).toMatchObject({ ok: true, reasons: ['task_archived'], count: 0 });
  });

  it('a deleted task drops the comments its entries consumed and records task_deleted', async () => {
    const task = await seedPlanTask(f.t.ctx, { sessionState: 'RUNNING' });
    const ref = await comment(task, 'Why two passes?');
    const id = await enqueue(queued(task, { planCommentRefs: [ref] }));
    await f.t.ctx.knex.transaction(async (trx) => {
      for (const table of ['task_plan_comments', 'task_plans', 'task_session_messages', 'task_session_turns', 'task_sessions'])
        await trx(table).where({ task_id: task.taskId }).delete();
      await trx('tasks').where({ id: task.taskId }).delete();
    });
    expect(await f.store.listFinishedQueues({ taskId: task.taskId })).toEqual([
      { sessionId: task.sessionId, taskId: task.taskId, reason: 'task_deleted', waiting: 1 },
    ]);
    expect(await f.store.cancelFinishedQueue(task.taskId, task.sessionId)).toMatchObject({
      ok: true,
      reasons: ['task_deleted'],
      returnedCommentIds: [],
      droppedCommentIds: [ref.id],
    });
    expect(await getPromptOutcome(f.t.ctx, id)).toMatchObject({ status: 'cancelled', reason: 'task_deleted' });
  });

  it('a Run queued for the primary is cancelled alone once its session is no longer the primary; the rest of the queue waits', async () => {
    const task = await seedPlanTask(f.t.ctx, { sessionState: 'RUNNING' });
    const ref = await comment(task, 'Rename step 2.');
    const run = await enqueue(queued(task, { target: { kind: 'primary', taskId: task.taskId, expectedSessionId: task.sessionId }, planCommentRefs: [ref] }));
    const plain = await enqueue(queued(task));
    expect(await f.store.listFinishedQueues({ sessionId: task.sessionId })).toEqual([]);

    await f.t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ is_primary: 0 });
    expect(await f.store.listFinishedQueues({ sessionId: task.sessionId })).toEqual([
      { sessionId: task.sessionId, taskId: task.taskId, reason: 'primary_session_changed', waiting: 1 },
    ]);
    const cancelled = await f.store.cancelFinishedQueue(task.taskId, task.sessionId);
    expect(cancelled).toMatchObject({ ok: true, reasons: ['primary_session_changed'], returnedCommentIds: [ref.id], count: 1 });
    expect(cancelled.ok && cancelled.withdrawn.map((w) => w.id)).toEqual([run]);
    const listed = await f.store.listQueue(task.sessionId);
    expect(listed.ok && listed.entries.map((e) => e.id)).toEqual([plain]);
  });

  it('an entry being delivered stays; a session in a state this service does not know keeps its queue', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const head = await enqueue(queued(task));
    const rest = await enqueue(queued(task));
    expect((await f.receipts.reserveHead(task.sessionId, 'dispatcher-A', 60_000))?.receipt.id).toBe(head);
    await setSession(task, 'PAUSED');
    expect(await f.store.listFinishedQueues({ sessionId: task.sessionId })).toEqual([]);
    expect(await f.store.cancelFinishedQueue(task.taskId, task.sessionId)).toMatchObject({ ok: true, reasons: [], withdrawn: [] });

    await setSession(task, 'COMPLETED');
    const cancelled = await f.store.cancelFinishedQueue(task.taskId, task.sessionId);
    expect(cancelled.ok && cancelled.withdrawn.map((w) => w.id)).toEqual([rest]);
    expect(await f.receipts.getReceipt(head)).toBeDefined();
  });
});
