import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AcceptPromptInput } from '../../src/repository/prompts/promptStore.js';
import { createPromptReceiptStore, type PromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { readQueueRevision } from '../../src/repository/prompts/queueRevision.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA } from '../../src/repository/schema/planCommentTables.js';
import { formatPlanCommentPrompt, PLAN_COMMENT_LIMITS } from '../../src/turns/planCommentPrompt.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { ownedStore, seedPlanTask, type OwnedStores, type PlanTask } from '../support/planComments.js';

describeEachDialect('editing and reordering queue entries on %s', (dialect) => {
  let t: TestDatabase;
  let store: OwnedStores;
  let receipts: PromptReceiptStore;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    store = ownedStore(t.ctx);
    receipts = createPromptReceiptStore(t.ctx, COMPLETE_PLAN_COMMENT_SCHEMA);
  });
  afterAll(async () => {
    await t.close();
  });

  async function stage(task: PlanTask): Promise<string> {
    const id = randomUUID();
    const staged = await store.stageAttachment({
      id,
      ownerId: 'user-1',
      workspaceId: task.workspaceId,
      name: 'a.txt',
      mimeType: 'text/plain',
      sizeBytes: 3,
      storageKey: `blob/${id}`,
      ttlMs: 3_600_000,
    });
    if (!staged.ok) throw new Error(`stage failed: ${JSON.stringify(staged)}`);
    return id;
  }

  async function enqueue(task: PlanTask, extra: Partial<AcceptPromptInput> = {}): Promise<string> {
    const accepted = await store.acceptPrompt({
      callerId: `q-${randomUUID()}`,
      target: { kind: 'session', sessionId: task.sessionId },
      content: 'typed text',
      deliveryKind: 'queued',
      queueMaxPerSession: 200,
      ...extra,
    });
    if (!accepted.ok) throw new Error(`enqueue failed: ${JSON.stringify(accepted)}`);
    return accepted.callerId;
  }

  const waitingIds = async (sessionId: string) => {
    const listed = await store.listQueue(sessionId);
    if (!listed.ok) throw new Error(JSON.stringify(listed));
    return listed.entries.map((e) => e.id);
  };

  it('an edit replaces the typed text under the same comments, the model, the plan mode and the attachments, at the version it names', async () => {
    const task = await seedPlanTask(t.ctx);
    const created = await store.createComment({ taskId: task.taskId, planId: task.planId, commentId: randomUUID(), body: 'Rename step 2.' });
    if (!created.ok || !created.comment) throw new Error(JSON.stringify(created));
    const kept = await stage(task);
    const dropped = await stage(task);
    const added = await stage(task);
    const input: Partial<AcceptPromptInput> = {
      planCommentRefs: [{ id: created.comment.id, version: 1 }],
      attachmentIds: [kept, dropped],
      attachmentOwnerId: 'user-1',
    };
    const id = await enqueue(task, input);
    const revision = await readQueueRevision(t.ctx, task.sessionId);

    const updated = await store.updateQueueEntry({
      sessionId: task.sessionId,
      queueId: id,
      version: 1,
      content: 'new typed text',
      model: 'm-2',
      planMode: true,
      attachmentIds: [added, kept],
      attachmentOwnerId: 'user-1',
    });

    expect(updated).toMatchObject({ ok: true, releasedAttachmentIds: [dropped], count: 1 });
    if (!updated.ok) throw new Error('unreachable');
    const comment = { id: created.comment.id, body: 'Rename step 2.', selected_text: '', created_at: created.comment.createdAt };
    expect(updated.entry).toMatchObject({ id, version: 2, model: 'm-2', planMode: true, content: formatPlanCommentPrompt([comment], 'new typed text') });
    expect(updated.entry.attachments.map((a) => (a as { id: string }).id)).toEqual([added, kept]);
    // The consumed comment references never change: the replay of the original request still matches.
    expect(updated.entry.metadata.plan_comment_refs).toEqual([{ id: created.comment.id, version: 1 }]);
    const states = await t.ctx.knex('task_message_attachments').select('id', 'state', 'queue_id').whereIn('id', [kept, dropped, added]);
    expect(Object.fromEntries(states.map((s: Record<string, unknown>) => [s.id, `${String(s.state)}:${String(s.queue_id)}`]))).toEqual({
      [kept]: `claimed:${id}`,
      [dropped]: 'staged:',
      [added]: `claimed:${id}`,
    });
    // An edit changes neither the waiting set nor its order.
    expect(await readQueueRevision(t.ctx, task.sessionId)).toBe(revision);
    expect(
      await store.acceptPrompt({
        callerId: id,
        target: { kind: 'session', sessionId: task.sessionId },
        content: 'typed text',
        deliveryKind: 'queued',
        queueMaxPerSession: 200,
        ...input,
      }),
    ).toMatchObject({
      ok: true,
      replayed: true,
      status: 'waiting',
    });

    // The version it saw is stale now: the queue as it is, and nothing written.
    expect(await store.updateQueueEntry({ sessionId: task.sessionId, queueId: id, version: 1, content: 'lost edit' })).toMatchObject({
      ok: false,
      code: 'conflict',
      reason: 'queue_changed',
      entries: [{ id, version: 2 }],
    });
    expect(await receipts.getReceipt(id)).toMatchObject({ version: 2, model: 'm-2' });
  });

  it('an edit is refused for an entry in flight, an unknown entry, an empty result and an attachment that cannot be claimed, writing nothing', async () => {
    const task = await seedPlanTask(t.ctx);
    const head = await enqueue(task);
    const next = await enqueue(task);
    expect((await receipts.reserveHead(task.sessionId, 'dispatcher-A', 60_000))?.receipt.id).toBe(head);

    expect(await store.updateQueueEntry({ sessionId: task.sessionId, queueId: head, version: 1, content: 'x' })).toMatchObject({
      ok: false,
      reason: 'entry_in_flight',
    });
    expect(await store.updateQueueEntry({ sessionId: task.sessionId, queueId: 'nope', version: 1, content: 'x' })).toMatchObject({
      ok: false,
      reason: 'queue_entry_not_found',
    });
    expect(await store.updateQueueEntry({ sessionId: task.sessionId, queueId: next, version: 1, content: '  ' })).toMatchObject({
      ok: false,
      reason: 'empty_prompt',
    });
    const other = await seedPlanTask(t.ctx);
    const foreign = await stage(other);
    expect(
      await store.updateQueueEntry({ sessionId: task.sessionId, queueId: next, version: 1, model: 'm', attachmentIds: [foreign], attachmentOwnerId: 'user-1' }),
    ).toMatchObject({ ok: false, reason: 'attachments_unavailable', attachmentIds: [foreign] });
    expect(await store.updateQueueEntry({ sessionId: task.sessionId, queueId: next, version: 1, attachmentIds: [foreign] })).toMatchObject({
      ok: false,
      reason: 'attachment_owner_required',
    });
    expect(await receipts.getReceipt(next)).toMatchObject({ version: 1, model: '', content: 'typed text' });
    expect(await t.ctx.knex('task_message_attachments').where({ id: foreign }).first()).toMatchObject({ state: 'staged' });
  });

  it('a reorder deals the waiting positions out in the new order and moves the revision once; a stale revision or an inexact list is queue_changed', async () => {
    const task = await seedPlanTask(t.ctx);
    const ids = [await enqueue(task), await enqueue(task), await enqueue(task), await enqueue(task)];
    const revision = await readQueueRevision(t.ctx, task.sessionId);
    const wanted = [ids[2]!, ids[0]!, ids[3]!, ids[1]!];

    const reordered = await store.reorderQueue({ sessionId: task.sessionId, queueIds: wanted, revision });
    expect(reordered).toMatchObject({ ok: true, revision: revision + 1 });
    expect(reordered.ok && reordered.entries.map((e) => e.id)).toEqual(wanted);
    expect(await waitingIds(task.sessionId)).toEqual(wanted);
    // The dispatcher follows the new order.
    expect((await receipts.reserveHead(task.sessionId, 'dispatcher-A', 60_000))?.receipt.id).toBe(ids[2]);

    const now = await readQueueRevision(t.ctx, task.sessionId);
    const rest = [ids[1]!, ids[3]!, ids[0]!];
    for (const [queueIds, rev] of [
      [rest, revision + 1], // stale: the reservation moved it
      [[...rest, ids[2]!], now], // names the entry in flight
      [rest.slice(1), now], // leaves one out
      [[rest[0]!, rest[0]!, rest[1]!], now], // names one twice
      [[...rest.slice(1), 'nope'], now], // names an unknown one
    ] as Array<[string[], number]>) {
      expect(await store.reorderQueue({ sessionId: task.sessionId, queueIds, revision: rev })).toMatchObject({
        ok: false,
        code: 'conflict',
        reason: 'queue_changed',
        revision: now,
        entries: [{ id: ids[0] }, { id: ids[3] }, { id: ids[1] }],
      });
    }
    expect(await readQueueRevision(t.ctx, task.sessionId)).toBe(now);
    // The same order again changes nothing, the revision included.
    expect(await store.reorderQueue({ sessionId: task.sessionId, queueIds: [ids[0]!, ids[3]!, ids[1]!], revision: now })).toMatchObject({
      ok: true,
      revision: now,
    });
    expect(await store.reorderQueue({ sessionId: 'no-such-session', queueIds: [], revision: 0 })).toMatchObject({ ok: false, reason: 'session_not_found' });
  });
});

describeEachDialect("the queue's text limit (its waiting prompts together, in UTF-8 bytes) on %s", (dialect) => {
  let t: TestDatabase;
  let store: OwnedStores;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    store = ownedStore(t.ctx);
  });
  afterAll(async () => {
    await t.close();
  });

  const { queueTextMaxBytes } = PLAN_COMMENT_LIMITS;
  // Three-byte characters, so SQLite's character length() would count them wrong.
  const textOf = (bytes: number) => '€'.repeat(Math.floor(bytes / 3)) + 'x'.repeat(bytes % 3);
  const enqueue = (task: PlanTask, content: string) =>
    store.acceptPrompt({
      callerId: `q-${randomUUID()}`,
      target: { kind: 'session', sessionId: task.sessionId },
      content,
      deliveryKind: 'queued',
      queueMaxPerSession: 10,
    });

  it('queues prompts up to exactly 1 MiB of waiting text and refuses one byte more with conflict queue_text_full', async () => {
    const task = await seedPlanTask(t.ctx);
    expect(await enqueue(task, textOf(queueTextMaxBytes - 1000))).toMatchObject({ ok: true });
    const over = await enqueue(task, textOf(1001));
    expect(over).toMatchObject({ ok: false, code: 'conflict', reason: 'queue_text_full', contentBytes: queueTextMaxBytes + 1, maxBytes: queueTextMaxBytes });
    expect((over as { message: string }).message).toMatch(/1048577 bytes of text \(at most 1048576\)/);
    expect(await enqueue(task, textOf(1000))).toMatchObject({ ok: true });
  });

  it('refuses an edit whose longer text takes the queue past 1 MiB, and takes one that ends exactly at it', async () => {
    const task = await seedPlanTask(t.ctx);
    expect(await enqueue(task, textOf(queueTextMaxBytes - 100))).toMatchObject({ ok: true });
    const accepted = await enqueue(task, textOf(50));
    if (!accepted.ok) throw new Error(JSON.stringify(accepted));
    const edit = (content: string) => store.updateQueueEntry({ sessionId: task.sessionId, queueId: accepted.callerId, version: 1, content });
    expect(await edit(textOf(101))).toMatchObject({ ok: false, code: 'conflict', reason: 'queue_text_full' });
    expect(await edit(textOf(100))).toMatchObject({ ok: true, entry: { version: 2 } });
  });
});
