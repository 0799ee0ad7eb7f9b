import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPromptReceiptStore, type PromptReceiptStore } from '../../src/repository/prompts/promptReceiptStore.js';
import { COMPLETE_PLAN_COMMENT_SCHEMA } from '../../src/repository/schema/planCommentTables.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { ownedStore, seedPlanTask, type OwnedStores, type PlanTask } from '../support/planComments.js';

describeEachDialect('a paused queue on %s', (dialect) => {
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

  async function accept(task: PlanTask, kind: 'queued' | 'direct'): Promise<string> {
    const accepted = await store.acceptPrompt({
      callerId: randomUUID(),
      target: { kind: 'session', sessionId: task.sessionId },
      content: `a ${kind} prompt`,
      deliveryKind: kind,
      queueMaxPerSession: 10,
    });
    if (!accepted.ok) throw new Error(JSON.stringify(accepted));
    return accepted.callerId;
  }

  const listed = async (sessionId: string) => {
    const all: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await receipts.listDispatchableSessions(500, after);
      all.push(...page);
      if (page.length < 500) return all.includes(sessionId);
      after = page[page.length - 1];
    }
  };

  it('keeps its head from the dispatcher, but not from a drain, and a resume gives it back; a session without a row runs', async () => {
    const task = await seedPlanTask(t.ctx);
    const queued = await accept(task, 'queued');
    expect(await store.listQueue(task.sessionId)).toMatchObject({ ok: true, autoRun: true });
    expect(await store.setAutoRun(task.sessionId, false)).toMatchObject({ ok: true, autoRun: false, changed: true, count: 1 });
    expect(await store.setAutoRun(task.sessionId, false)).toMatchObject({ ok: true, changed: false });

    expect(await listed(task.sessionId)).toBe(false);
    expect(await receipts.headEligibility(task.sessionId)).toEqual({ ok: false, reason: 'queue_paused' });
    expect(await receipts.reserveHead(task.sessionId, 'A', 60_000)).toBeUndefined();
    // Paused entries still wait, and count.
    expect(await store.listQueue(task.sessionId)).toMatchObject({ ok: true, autoRun: false, entries: [{ id: queued }] });

    expect(await receipts.headEligibility(task.sessionId, { drain: true })).toMatchObject({ ok: true });
    const drained = await receipts.reserveHead(task.sessionId, 'A', 60_000, { drain: true });
    expect(drained?.receipt.id).toBe(queued);
    expect(await receipts.release(queued, drained!.token, { retryAfterMs: 0, error: '' })).toEqual({ ok: true });

    expect(await store.setAutoRun(task.sessionId, true)).toMatchObject({ ok: true, autoRun: true, changed: true });
    expect(await listed(task.sessionId)).toBe(true);
    expect((await receipts.reserveHead(task.sessionId, 'A', 60_000))?.receipt.id).toBe(queued);
  });

  it('never holds back a direct prompt: a send to a paused session is listed and reserved', async () => {
    const task = await seedPlanTask(t.ctx);
    await accept(task, 'queued');
    expect(await store.setAutoRun(task.sessionId, false)).toMatchObject({ ok: true });
    const direct = await accept(task, 'direct');
    expect(await listed(task.sessionId)).toBe(true);
    expect((await receipts.reserveHead(task.sessionId, 'A', 60_000))?.receipt.id).toBe(direct);
  });

  it('refuses an unknown session', async () => {
    expect(await store.setAutoRun('no-such-session', false)).toMatchObject({ ok: false, reason: 'session_not_found' });
  });
});
