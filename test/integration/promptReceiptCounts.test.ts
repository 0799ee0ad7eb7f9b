import { afterAll, beforeAll, expect, it } from 'vitest';
import { rawRows } from '../../src/repository/context.js';
import { createPromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA } from '../../src/repository/schema/planCommentTables.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { seedPlanTask } from '../support/planComments.js';
import { insertQueuedReceipt } from '../support/promptReceipts.js';

describeEachDialect('prompt receipts counted by kind and step of delivery on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('counts waiting, reserved and attempted receipts of each kind, with every series present, and waiting as the queue rule says', async () => {
    const store = createPromptReceiptStore(t.ctx, COMPLETE_PLAN_COMMENT_SCHEMA);
    expect(await store.countByState()).toEqual([
      { kind: 'direct', state: 'waiting', count: 0 },
      { kind: 'direct', state: 'reserved', count: 0 },
      { kind: 'direct', state: 'attempted', count: 0 },
      { kind: 'queued', state: 'waiting', count: 0 },
      { kind: 'queued', state: 'reserved', count: 0 },
      { kind: 'queued', state: 'attempted', count: 0 },
    ]);
    const a = await seedPlanTask(t.ctx);
    const b = await seedPlanTask(t.ctx);
    const c = await seedPlanTask(t.ctx);
    // Session a: a head reserved by a dispatcher, two behind it waiting.
    for (let i = 0; i < 3; i++) await insertQueuedReceipt(t.ctx, { sessionId: a.sessionId, taskId: a.taskId });
    expect(await store.reserveHead(a.sessionId, 'owner', 30_000)).toBeDefined();
    // Session b: a direct prompt past its marker, and one Kandev flagged in flight (not waiting).
    const direct = await insertQueuedReceipt(t.ctx, { sessionId: b.sessionId, taskId: b.taskId });
    await rawRows(t.ctx, `UPDATE queued_messages SET delivery_kind = 'direct', delivery_attempted_at = ? WHERE id = ?`, [t.ctx.clock(), direct]);
    await insertQueuedReceipt(t.ctx, {
      sessionId: b.sessionId,
      taskId: b.taskId,
      metadata: { lifecycle_durable_until_accepted: true, lifecycle_reserved_in_flight: true },
    });
    // Session c: a direct prompt not yet reserved.
    const waitingDirect = await insertQueuedReceipt(t.ctx, { sessionId: c.sessionId, taskId: c.taskId });
    await rawRows(t.ctx, `UPDATE queued_messages SET delivery_kind = 'direct' WHERE id = ?`, [waitingDirect]);

    const counts = Object.fromEntries((await store.countByState())!.map((r) => [`${r.kind}/${r.state}`, r.count]));
    expect(counts).toEqual({
      'direct/waiting': 1,
      'direct/reserved': 0,
      'direct/attempted': 1,
      'queued/waiting': 2,
      'queued/reserved': 2,
      'queued/attempted': 0,
    });
    // The queued waiting series is the sum of every session's waiting queue.
    expect(
      (await store.queueStatus(a.sessionId)).entries.length +
        (await store.queueStatus(b.sessionId)).entries.length +
        (await store.queueStatus(c.sessionId)).entries.length,
    ).toBe(counts['queued/waiting']);
  });

  it('is undefined on a database without a receipt table', async () => {
    const store = createPromptReceiptStore(t.ctx, { ...COMPLETE_PLAN_COMMENT_SCHEMA, receiptTable: null });
    expect(await store.countByState()).toBeUndefined();
  });
});
