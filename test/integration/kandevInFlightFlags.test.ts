import { expect, it } from 'vitest';
import { describeEachDialect } from '../support/databases.js';
import { seedPlanTask } from '../support/planComments.js';
import { useQueueFixtures } from '../support/queueFixtures.js';

/** Kandev's `QueuedMessage.IsReservedInFlight`, as its queue readers apply it to a row's metadata. */
function kandevSeesInFlight(metadataJson: string): boolean {
  const meta = JSON.parse(metadataJson) as Record<string, unknown>;
  const durable = meta.lifecycle_durable_until_accepted === true || meta.origin === 'github_pr_automation';
  return durable && meta.lifecycle_reserved_in_flight === true;
}

/**
 * An owned-mode `queued_messages` is read by Kandev's own queue code too: the rows this service is
 * delivering must look in flight to it, and a row given back must look waiting again.
 */
describeEachDialect("receipt rows as Kandev's queue readers see them on %s", (dialect) => {
  const f = useQueueFixtures(dialect);
  const metadataOf = async (id: string) => String((await f.t.ctx.knex('queued_messages').where({ id }).first()).metadata_json);

  it('a queued row is in flight while reserved and attempted, and waits again once given back', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const id = await f.enqueue(f.queued(task));
    expect(kandevSeesInFlight(await metadataOf(id))).toBe(false);

    const first = await f.receipts.reserveHead(task.sessionId, 'dispatcher-A', 60_000);
    expect(first?.receipt.id).toBe(id);
    expect(kandevSeesInFlight(await metadataOf(id))).toBe(true);
    expect(await f.receipts.release(id, first!.token, { retryAfterMs: 0, error: 'busy', countsAsAttempt: false })).toEqual({ ok: true });
    expect(kandevSeesInFlight(await metadataOf(id))).toBe(false);
    expect((await f.receipts.queueStatus(task.sessionId)).entries.length).toBe(1);

    const second = await f.receipts.reserveHead(task.sessionId, 'dispatcher-A', 60_000);
    expect(await f.receipts.persistTranscript(id, second!.token)).toMatchObject({ ok: true });
    expect(await f.receipts.markAttempted(id, second!.token, { retryAfterMs: 0 })).toMatchObject({ ok: true });
    expect(kandevSeesInFlight(await metadataOf(id))).toBe(true);
    // The rest of the metadata is kept through both writes.
    expect(JSON.parse(await metadataOf(id))).toMatchObject({ client_queue_id: id });
  });

  it('an expired reservation cleared by reconciliation waits again', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const id = await f.enqueue(f.queued(task));
    const reservation = await f.receipts.reserveHead(task.sessionId, 'dead-owner', 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(await f.receipts.clearExpiredReservation(id, reservation!.token)).toBe(true);
    expect(kandevSeesInFlight(await metadataOf(id))).toBe(false);
  });

  it('a direct receipt is in flight from its insert, and stays so when given back', async () => {
    const task = await seedPlanTask(f.t.ctx);
    const accepted = await f.store.acceptPrompt({ callerId: `d-${task.taskId}`, target: { kind: 'session', sessionId: task.sessionId }, content: 'now' });
    if (!accepted.ok) throw new Error(JSON.stringify(accepted));
    expect(kandevSeesInFlight(await metadataOf(accepted.callerId))).toBe(true);
    const reservation = await f.receipts.reserveHead(task.sessionId, 'dispatcher-A', 60_000);
    expect(await f.receipts.release(accepted.callerId, reservation!.token, { retryAfterMs: 0, error: 'hook failed' })).toEqual({ ok: true });
    expect(kandevSeesInFlight(await metadataOf(accepted.callerId))).toBe(true);
  });
});
