import { expect, it } from 'vitest';
import { createRepositoryContext } from '../../src/repository/context.js';
import { createPromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { getPromptOutcome } from '../../src/repository/prompts/promptOutcomes.js';
import { readQueueRevision } from '../../src/repository/prompts/queueRevision.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA } from '../../src/repository/schema/planCommentTables.js';
import { createSession } from '../../src/repository/tasks/tasks.js';
import { describeEachDialect, openSecondPool } from '../support/databases.js';
import { useQueueFixtures } from '../support/queueFixtures.js';
import { seedPlanTask } from '../support/planComments.js';

const TTL = 60_000;

describeEachDialect('withdrawing queue entries on %s', (dialect) => {
  const f = useQueueFixtures(dialect, { file: true });
  const { comment, stage, queued, enqueue } = f;

  const commentRows = (taskId: string) =>
    f.t.ctx
      .knex('task_plan_comments')
      .select('id', 'plan_id', 'body', 'selected_text', 'anchor_from', 'anchor_to', 'version', 'created_at')
      .where({ task_id: taskId })
      .orderBy('id');
  const collectionRevision = async (taskId: string) => Number((await f.t.ctx.knex('task_plans').where({ task_id: taskId }).first()).comments_revision);
  const attachmentState = async (id: string) => (await f.t.ctx.knex('task_message_attachments').where({ id }).first()) as Record<string, unknown>;

  it('a removed entry gives back its comments as they were and its attachments as staged, in one step of the queue revision', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const first = await comment(task, 'Rename step 2.', { selectedText: 'Step 2: migrate', anchorFrom: 3, anchorTo: 17 });
    const second = await comment(task, 'Why two passes?');
    const before = await commentRows(task.taskId);
    const attachment = await stage(task);
    const input = queued(task, { planCommentRefs: [first, second], attachmentIds: [attachment], attachmentOwnerId: 'user-1' });
    const id = await enqueue(input);
    const other = await enqueue(queued(task));
    expect(await commentRows(task.taskId)).toEqual([]);
    expect(await attachmentState(attachment)).toMatchObject({ state: 'claimed', queue_id: id });
    const revisionBefore = await readQueueRevision(f.t.ctx, task.sessionId);
    const collectionBefore = await collectionRevision(task.taskId);

    const removed = await f.store.withdraw({ sessionId: task.sessionId, queueIds: [id], status: 'removed', reason: '' });

    expect(removed).toMatchObject({ ok: true, taskId: task.taskId, withdrawn: [{ id, attachmentIds: [attachment] }], droppedCommentIds: [], count: 1 });
    expect(removed.ok && [...removed.returnedCommentIds].sort()).toEqual([first.id, second.id].sort());
    expect(await commentRows(task.taskId)).toEqual(before);
    expect(await collectionRevision(task.taskId)).toBe(collectionBefore + 1);
    expect(removed.ok && removed.snapshot?.revision).toBe(collectionBefore + 1);
    expect(await attachmentState(attachment)).toMatchObject({ state: 'staged', queue_id: '' });
    expect(await readQueueRevision(f.t.ctx, task.sessionId)).toBe(revisionBefore + 1);
    expect(removed.ok && removed.revision).toBe(revisionBefore + 1);
    const listed = await f.store.listQueue(task.sessionId);
    expect(listed.ok && listed.entries.map((e) => e.id)).toEqual([other]);
    expect(await getPromptOutcome(f.t.ctx, id)).toMatchObject({ status: 'removed', reason: '', sessionId: task.sessionId });

    // The original request, replayed: the answer is the removal, and nothing is queued again.
    const replay = await f.store.acceptPrompt(input);
    expect(replay).toMatchObject({ ok: true, replayed: true, status: 'removed', deliveryKind: 'queued', queueId: id });
    expect(replay.ok && [...replay.consumedCommentIds].sort()).toEqual([first.id, second.id].sort());
    const again = await f.store.listQueue(task.sessionId);
    expect(again.ok && again.entries.map((e) => e.id)).toEqual([other]);
    // The same caller id for another request is still a conflict.
    expect(await f.store.acceptPrompt({ ...input, content: 'something else' })).toMatchObject({ ok: false, reason: 'caller_id_conflict' });
  });

  it('an entry given back after its transcript was written loses that transcript when removed, and its attachment comes back', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const attachment = await stage(task);
    const id = await enqueue(queued(task, { attachmentIds: [attachment], attachmentOwnerId: 'user-1' }));
    const reservation = await f.receipts.reserveHead(task.sessionId, 'dispatcher-A', TTL);
    const transcript = await f.receipts.persistTranscript(id, reservation!.token);
    if (!transcript.ok) throw new Error(JSON.stringify(transcript));
    expect(await f.t.ctx.knex('task_session_messages').where({ id }).first()).toBeDefined();
    expect(await attachmentState(attachment)).toMatchObject({ state: 'claimed', message_id: id });
    // The session went busy at the marker: the entry waits again, its transcript still linked.
    await f.t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ state: 'RUNNING' });
    expect(await f.receipts.markAttempted(id, reservation!.token, { retryAfterMs: 0 })).toMatchObject({ ok: false, reason: 'session_unavailable' });

    const removed = await f.store.withdraw({ sessionId: task.sessionId, queueIds: [id], status: 'removed', reason: '' });

    expect(removed).toMatchObject({ ok: true, withdrawn: [{ id, attachmentIds: [attachment] }] });
    expect(await f.t.ctx.knex('task_session_messages').where({ id }).first()).toBeUndefined();
    expect(await f.t.ctx.knex('task_session_turns').where({ id: transcript.turnId }).first()).toBeUndefined();
    expect(await attachmentState(attachment)).toMatchObject({ state: 'staged', queue_id: '', message_id: '' });
  });

  it('an entry being delivered is never removed, and a clear leaves it and takes the rest', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const head = await enqueue(queued(task));
    const rest = [await enqueue(queued(task)), await enqueue(queued(task))];
    const reservation = await f.receipts.reserveHead(task.sessionId, 'dispatcher-A', TTL);
    expect(reservation?.receipt.id).toBe(head);

    expect(await f.store.withdraw({ sessionId: task.sessionId, queueIds: [head, rest[0]!], status: 'removed', reason: '' })).toMatchObject({
      ok: false,
      code: 'conflict',
      reason: 'entry_in_flight',
      queueIds: [head],
    });
    // All or nothing: the waiting one named beside it is still there.
    const listed = await f.store.listQueue(task.sessionId);
    expect(listed.ok && listed.entries.map((e) => e.id)).toEqual(rest);

    const cleared = await f.store.withdraw({ sessionId: task.sessionId, status: 'removed', reason: '' });
    expect(cleared.ok && cleared.withdrawn.map((w) => w.id)).toEqual(rest);
    expect(cleared).toMatchObject({ ok: true, count: 0 });
    expect(await f.receipts.getReceipt(head)).toMatchObject({ id: head, reservationToken: reservation!.token });

    // A clear of a queue with nothing waiting is a success that changes nothing.
    const revision = await readQueueRevision(f.t.ctx, task.sessionId);
    expect(await f.store.withdraw({ sessionId: task.sessionId, status: 'removed', reason: '' })).toMatchObject({ ok: true, withdrawn: [], revision });
  });

  it('an unknown entry, another session’s entry and an unknown session are not found, and nothing changes', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const mine = await enqueue(queued(task));
    const otherSession = await createSession(f.t.ctx, { taskId: task.taskId, state: 'IDLE', isPrimary: false });
    const theirs = await enqueue(queued(task, { target: { kind: 'session', sessionId: otherSession.id } }));

    expect(await f.store.withdraw({ sessionId: task.sessionId, queueIds: [theirs], status: 'removed', reason: '' })).toMatchObject({
      ok: false,
      code: 'not_found',
      reason: 'queue_entry_not_found',
    });
    expect(await f.store.withdraw({ sessionId: task.sessionId, queueIds: [mine, 'nope'], status: 'removed', reason: '' })).toMatchObject({
      ok: false,
      code: 'not_found',
      reason: 'queue_entry_not_found',
    });
    expect(await f.store.withdraw({ sessionId: 'no-such-session', status: 'removed', reason: '' })).toMatchObject({
      ok: false,
      code: 'not_found',
      reason: 'session_not_found',
    });
    const listed = await f.store.listQueue(task.sessionId);
    expect(listed.ok && listed.entries.map((e) => e.id)).toEqual([mine]);
  });

  it('comments of a plan deleted meanwhile are dropped, and the reply names them', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const ref = await comment(task, 'Annotating text that will be gone.');
    const id = await enqueue(queued(task, { planCommentRefs: [ref] }));
    expect(await f.store.deletePlan({ taskId: task.taskId, planId: task.planId })).toMatchObject({ ok: true, deleted: true });

    const removed = await f.store.withdraw({ sessionId: task.sessionId, queueIds: [id], status: 'cancelled', reason: 'test_reason' });

    expect(removed).toMatchObject({ ok: true, returnedCommentIds: [], droppedCommentIds: [ref.id], snapshot: null });
    expect(await commentRows(task.taskId)).toEqual([]);
    expect(await f.store.acceptPrompt(queued(task, { callerId: id, planCommentRefs: [ref] }))).toMatchObject({
      ok: true,
      replayed: true,
      status: 'cancelled',
      statusReason: 'test_reason',
    });
  });

  it('the queue revision moves when an entry is accepted, reserved and released, and a list shows it', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const r0 = await readQueueRevision(f.t.ctx, task.sessionId);
    const id = await enqueue(queued(task));
    expect(await readQueueRevision(f.t.ctx, task.sessionId)).toBe(r0 + 1);
    const reservation = await f.receipts.reserveHead(task.sessionId, 'dispatcher-A', TTL);
    expect(await readQueueRevision(f.t.ctx, task.sessionId)).toBe(r0 + 2);
    expect(await f.receipts.release(id, reservation!.token, { retryAfterMs: 0, error: '' })).toEqual({ ok: true });
    expect(await readQueueRevision(f.t.ctx, task.sessionId)).toBe(r0 + 3);
    const listed = await f.store.listQueue(task.sessionId);
    expect(listed).toMatchObject({ ok: true, revision: r0 + 3, entries: [{ id, version: 1 }] });
  });

  it('a removal racing a dispatcher’s reservation from another pool: exactly one of them has the entry', async () => {
    // PostgreSQL: a second pool, so the two transactions really overlap; SQLite's one writer serialises them.
    const second = dialect === 'postgres' ? openSecondPool(f.t) : undefined;
    try {
      const otherReceipts = second ? createPromptReceiptStore(createRepositoryContext(second), COMPLETE_PLAN_COMMENT_SCHEMA) : f.receipts;
      for (let round = 0; round < 10; round++) {
        const task = await seedPlanTask(f.t.ctx);
        const id = await enqueue(queued(task));
        const [removed, reserved] = await Promise.all([
          f.store.withdraw({ sessionId: task.sessionId, queueIds: [id], status: 'removed', reason: '' }),
          otherReceipts.reserveHead(task.sessionId, 'dispatcher-B', TTL),
        ]);
        if (reserved) {
          expect(removed).toMatchObject({ ok: false, reason: 'entry_in_flight' });
          expect(await f.receipts.getReceipt(id)).toMatchObject({ reservationToken: reserved.token });
        } else {
          expect(removed).toMatchObject({ ok: true, withdrawn: [{ id }] });
          expect(await f.receipts.getReceipt(id)).toBeUndefined();
        }
      }
    } finally {
      await second?.destroy();
    }
  });
});
