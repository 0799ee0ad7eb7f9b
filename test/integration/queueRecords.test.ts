import { afterEach, expect, it } from 'vitest';
import { beginOrJoin } from '../../src/repository/context.js';
import { getPromptOutcome, recordPromptOutcome } from '../../src/repository/prompts/promptOutcomes.js';
import { bumpQueueRevision, readQueueRevision } from '../../src/repository/prompts/queueRevision.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';

describeEachDialect('queue revision and prompt outcome records on %s', (dialect) => {
  let t: TestDatabase | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('a session starts at revision 0, each bump moves it by one, and sessions count apart', async () => {
    t = await openTestDatabase(dialect);
    expect(await readQueueRevision(t.ctx, 's1')).toBe(0);
    expect(await beginOrJoin(t.ctx, (tx) => bumpQueueRevision(tx, 's1'))).toBe(1);
    expect(await beginOrJoin(t.ctx, (tx) => bumpQueueRevision(tx, 's1'))).toBe(2);
    expect(await beginOrJoin(t.ctx, (tx) => bumpQueueRevision(tx, 's2'))).toBe(1);
    expect(await readQueueRevision(t.ctx, 's1')).toBe(2);
  });

  it('a bump rolled back with its transaction leaves the revision where it was', async () => {
    t = await openTestDatabase(dialect);
    await beginOrJoin(t.ctx, (tx) => bumpQueueRevision(tx, 's1'));
    await expect(
      beginOrJoin(t.ctx, async (tx) => {
        await bumpQueueRevision(tx, 's1');
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await readQueueRevision(t.ctx, 's1')).toBe(1);
  });

  it('an outcome reads back as written, and an unknown id reads as none', async () => {
    t = await openTestDatabase(dialect);
    const outcome = {
      id: 'caller-1',
      sessionId: 's1',
      taskId: 't1',
      deliveryKind: 'queued',
      status: 'cancelled' as const,
      reason: 'session_completed',
      fingerprint: 'fp',
      detail: { returned_comment_ids: ['c1'] },
    };
    await beginOrJoin(t.ctx, (tx) => recordPromptOutcome(tx, outcome));
    expect(await getPromptOutcome(t.ctx, 'caller-1')).toMatchObject(outcome);
    expect(await getPromptOutcome(t.ctx, 'caller-2')).toBeUndefined();
    await expect(beginOrJoin(t.ctx, (tx) => recordPromptOutcome(tx, outcome))).rejects.toThrow();
  });
});
