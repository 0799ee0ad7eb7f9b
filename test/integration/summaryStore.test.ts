import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireLease, releaseLease } from '../../src/repository/projection/leases.js';
import { CorruptMetaError, PENDING_ACTION_EPOCH_KEY, nextPendingActionProjectionEpoch } from '../../src/repository/projection/meta.js';
import { compareAndSetStatusSummaries, loadStatusSummaries } from '../../src/repository/projection/statusSummaries.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { withManualClock } from '../support/manualClock.js';
import { seedSession } from '../support/seed.js';
import { listTaskIdsAfter } from '../../src/repository/tasks/tasks.js';

describeEachDialect('summary store, epoch and leases on %s', (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t.close();
  });

  const row = (taskId: string, workspaceId: string, revision: number, summary: string) => ({
    taskId,
    workspaceId,
    revision,
    summary,
    updatedAt: '2026-11-30T00:00:00.000000000Z',
  });
  const compareAndSetOne = async (next: ReturnType<typeof row>) => (await compareAndSetStatusSummaries(t.ctx, [next])).has(next.taskId);

  it('accepts a first insert, a newer semantic change, and refuses an older revision or a semantic no-op', async () => {
    const { taskId, workspaceId } = await seedSession(t.ctx);
    expect(await compareAndSetOne(row(taskId, workspaceId, 1, '{}'))).toBe(true);
    expect(await compareAndSetOne(row(taskId, workspaceId, 2, '{"pending_action":"clarification"}'))).toBe(true);
    expect(await compareAndSetOne(row(taskId, workspaceId, 2, '{"pending_action":"permission"}'))).toBe(false);
    expect(await compareAndSetOne(row(taskId, workspaceId, 1, '{}'))).toBe(false);
    expect(await compareAndSetOne(row(taskId, workspaceId, 3, '{"pending_action":"clarification"}'))).toBe(false);
    const stored = (await loadStatusSummaries(t.ctx, [taskId])).get(taskId)!;
    expect(stored).toMatchObject({ revision: 2, summary: '{"pending_action":"clarification"}', workspaceId });
    await expect(compareAndSetOne(row(taskId, workspaceId, 0, '{}'))).rejects.toThrow(RangeError);
  });

  it('compare-and-sets many tasks in one call with the same rule per row, across statement chunks', async () => {
    const tasks = await Promise.all(Array.from({ length: 4 }, () => seedSession(t.ctx)));
    const [a, b, c, d] = tasks.map((x) => x.taskId) as [string, string, string, string];
    const ws = (taskId: string) => tasks.find((x) => x.taskId === taskId)!.workspaceId;
    await compareAndSetStatusSummaries(t.ctx, [row(a, ws(a), 1, '{}'), row(b, ws(b), 1, '{}'), row(c, ws(c), 3, '{}')]);
    const accepted = await compareAndSetStatusSummaries(t.ctx, [
      row(a, ws(a), 2, '{"pending_action":"clarification"}'), // newer and different: written
      row(b, ws(b), 2, '{}'), // semantic no-op: refused
      row(c, ws(c), 3, '{"pending_action":"permission"}'), // not newer: refused
      row(d, ws(d), 1, '{"pending_action":"permission"}'), // first insert: written
    ]);
    expect([...accepted].sort()).toEqual([a, d].sort());
    const stored = await loadStatusSummaries(t.ctx, [a, b, c, d]);
    expect([a, b, c, d].map((id) => stored.get(id)!.revision)).toEqual([2, 1, 3, 1]);
    await expect(compareAndSetStatusSummaries(t.ctx, [row(a, ws(a), 3, '{}'), row(a, ws(a), 4, '{}')])).rejects.toThrow(/twice/);
    expect(await compareAndSetStatusSummaries(t.ctx, [])).toEqual(new Set());

    const many = await Promise.all(Array.from({ length: 1205 }, () => seedSession(t.ctx)));
    const written = await compareAndSetStatusSummaries(
      t.ctx,
      many.map((x) => row(x.taskId, x.workspaceId, 1, '{}')),
    );
    expect(written.size).toBe(1205);
    expect(
      (
        await loadStatusSummaries(
          t.ctx,
          many.map((x) => x.taskId),
        )
      ).size,
    ).toBe(1205);
  });

  it('refuses a summary for a task that does not exist (foreign key)', async () => {
    await expect(compareAndSetOne(row('no-such-task', 'ws', 1, '{}'))).rejects.toThrow();
  });

  it('pages task ids by keyset in id order', async () => {
    const ids = (await Promise.all([0, 1, 2, 3, 4].map(() => seedSession(t.ctx)))).map((s) => s.taskId).sort();
    const all: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page = await listTaskIdsAfter(t.ctx, after, 2);
      if (page.length === 0) break;
      all.push(...page);
      after = page[page.length - 1]!;
    }
    expect(all).toEqual([...all].sort());
    expect(all).toEqual(expect.arrayContaining(ids));
  });

  it('allocates a strictly increasing projection epoch and refuses to reset a corrupt one', async () => {
    const first = Number(await nextPendingActionProjectionEpoch(t.ctx));
    const second = Number(await nextPendingActionProjectionEpoch(t.ctx));
    expect(second).toBe(first + 1);
    for (const corrupt of ['abc', '0', '007', '-3', '']) {
      await t.ctx.knex('kandev_meta').where({ key: PENDING_ACTION_EPOCH_KEY }).update({ value: corrupt });
      await expect(nextPendingActionProjectionEpoch(t.ctx)).rejects.toThrow(CorruptMetaError);
      expect((await t.ctx.knex('kandev_meta').where({ key: PENDING_ACTION_EPOCH_KEY }).first()).value).toBe(corrupt);
    }
    await t.ctx.knex('kandev_meta').where({ key: PENDING_ACTION_EPOCH_KEY }).update({ value: '41' });
    expect(await nextPendingActionProjectionEpoch(t.ctx)).toBe('42');
  });

  it('grants a lease to one owner at a time, renews it for its holder, and hands it over after expiry or release', async () => {
    const { ctx, time } = withManualClock(t.ctx, '2026-11-30T10:00:00Z');
    expect(await acquireLease(ctx, 'boot', 'replica-a', 60_000)).toBe(true);
    expect(await acquireLease(ctx, 'boot', 'replica-b', 60_000)).toBe(false);
    time.set('2026-11-30T10:00:30Z');
    expect(await acquireLease(ctx, 'boot', 'replica-a', 60_000)).toBe(true);
    time.set('2026-11-30T10:01:20Z');
    expect(await acquireLease(ctx, 'boot', 'replica-b', 60_000)).toBe(false);
    time.set('2026-11-30T10:01:31Z');
    expect(await acquireLease(ctx, 'boot', 'replica-b', 60_000)).toBe(true);
    await releaseLease(ctx, 'boot', 'replica-a');
    expect(await acquireLease(ctx, 'boot', 'replica-a', 60_000)).toBe(false);
    await releaseLease(ctx, 'boot', 'replica-b');
    expect(await acquireLease(ctx, 'boot', 'replica-a', 60_000)).toBe(true);
  });
});
