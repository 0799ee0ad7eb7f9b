import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AdmissionLockOrderError, createTaskAdmission, type TaskAdmission } from '../../src/repository/admission/taskAdmission.js';
import { beginOrJoin, type RepositoryContext } from '../../src/repository/context.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createGate } from '../support/gate.js';
import { eventually } from '../support/nats.js';

/**
 * The admission lease and the mutation lock within one process, on both dialects: what serializes
 * with what, re-entrancy, the lock order it refuses to break, and the timeout outcome.
 * Cross-process behaviour on PostgreSQL is in taskAdmissionPostgres.test.ts.
 */
describeEachDialect('the task admission lease on %s', (dialect) => {
  let t: TestDatabase;
  let admission: TaskAdmission;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    admission = createTaskAdmission(t.db, { lockTimeoutMs: 10_000 });
  });
  afterAll(async () => {
    await t.close();
  });

  const task = () => `task-${randomUUID()}`;
  const write = (ctx: RepositoryContext, key: string) => ctx.knex('kandev_meta').insert({ key, value: 'written' });
  const written = async (key: string) => (await t.ctx.knex('kandev_meta').where({ key }).first()) !== undefined;

  it('serializes two leases on one task, in arrival order', async () => {
    const taskId = task();
    const events: string[] = [];
    const gate = createGate();
    const first = admission.withLease(taskId, async () => {
      events.push('first holds');
      await gate.opened;
      events.push('first ends');
      return 'first';
    });
    await eventually(() => (events.includes('first holds') ? true : undefined));
    const second = admission.withLease(taskId, async () => {
      events.push('second holds');
      return 'second';
    });
    await eventually(() => (admission.waiting(taskId) === 1 ? true : undefined), 10_000, 'the second lease to queue');
    events.push('second queued');
    gate.open();
    expect(await first).toEqual({ ok: true, value: 'first' });
    expect(await second).toEqual({ ok: true, value: 'second' });
    expect(events).toEqual(['first holds', 'second queued', 'first ends', 'second holds']);
  });

  it('does not serialize leases on two tasks', async () => {
    const gate = createGate();
    let held = false;
    const first = admission.withLease(task(), async () => {
      held = true;
      await gate.opened;
    });
    await eventually(() => (held ? true : undefined));
    // Completes while the first lease is still held: the tasks do not wait for each other.
    expect(await admission.withLease(task(), async () => 'other task')).toEqual({ ok: true, value: 'other task' });
    gate.open();
    expect(await first).toEqual({ ok: true, value: undefined });
  });

  it('makes a mutation of the task wait while a lease is held, and a lease wait for a mutation', async () => {
    const taskId = task();
    const key = randomUUID();
    const events: string[] = [];
    const gate = createGate();
    const lease = admission.withLease(taskId, async () => {
      events.push('lease holds');
      await gate.opened;
      events.push('lease ends');
    });
    await eventually(() => (events.includes('lease holds') ? true : undefined));
    const mutation = admission.withMutation(t.ctx, taskId, async (tx) => {
      events.push('mutation runs');
      await write(tx, key);
    });
    await eventually(() => (admission.waiting(taskId) === 1 ? true : undefined), 10_000, 'the mutation to queue');
    expect(await written(key)).toBe(false);
    gate.open();
    await lease;
    expect(await mutation).toEqual({ ok: true, value: undefined });
    expect(events).toEqual(['lease holds', 'lease ends', 'mutation runs']);
    expect(await written(key)).toBe(true);

    const mutationGate = createGate();
    const order: string[] = [];
    const holding = admission.withMutation(t.ctx, taskId, async () => {
      order.push('mutation holds');
      await mutationGate.opened;
      order.push('mutation ends');
    });
    await eventually(() => (order.includes('mutation holds') ? true : undefined));
    const waitingLease = admission.withLease(taskId, async () => void order.push('lease runs'));
    await eventually(() => (admission.waiting(taskId) === 1 ? true : undefined), 10_000, 'the lease to queue');
    mutationGate.open();
    await holding;
    await waitingLease;
    expect(order).toEqual(['mutation holds', 'mutation ends', 'lease runs']);
  });

  it('lets a mutation, or a lease, called inside a held lease of the task join it instead of deadlocking', async () => {
    const taskId = task();
    const key = randomUUID();
    const outcome = await admission.withLease(
      taskId,
      async () => {
        const mutation = await admission.withMutation(t.ctx, taskId, async (tx) => {
          await write(tx, key);
          // A nested mutation given the transaction joins it.
          return admission.withMutation(tx, taskId, async (nested) => nested === tx);
        });
        const nestedLease = await admission.withLease(taskId, async () => 'nested lease');
        const sameCaller = await admission.withLease(taskId, async () => 'same caller', { callerId: 'caller-1' });
        return { mutation, nestedLease, sameCaller };
      },
      { callerId: 'caller-1' },
    );
    expect(outcome).toEqual({
      ok: true,
      value: {
        mutation: { ok: true, value: { ok: true, value: true } },
        nestedLease: { ok: true, value: 'nested lease' },
        sameCaller: { ok: true, value: 'same caller' },
      },
    });
    expect(await written(key)).toBe(true);
  });

  it('refuses to take an admission lock that would not be the outermost one', async () => {
    const taskId = task();
    // Inside a transaction: it would wait for the lease holding a connection (SQLite: the writer).
    await expect(beginOrJoin(t.ctx, (tx) => admission.withMutation(tx, taskId, async () => 'ran'))).rejects.toBeInstanceOf(AdmissionLockOrderError);
    // Inside another task's lease, or with another caller id: leases do not nest.
    const nested = await admission.withLease(taskId, async () => ({
      otherTask: await admission.withLease(task(), async () => 'ran').catch((err: unknown) => err),
      otherTaskMutation: await admission.withMutation(t.ctx, task(), async () => 'ran').catch((err: unknown) => err),
      otherCaller: await admission.withLease(taskId, async () => 'ran', { callerId: 'someone' }).catch((err: unknown) => err),
    }));
    expect(nested.ok).toBe(true);
    const value = (nested as { value: Record<string, unknown> }).value;
    for (const refusal of Object.values(value)) expect(refusal).toMatchObject({ name: 'AdmissionLockOrderError', code: 'ADMISSION_LOCK_ORDER' });
  });

  it('serializes two leases of one caller id even on two tasks (R20b), and leases of one task whatever their caller ids', async () => {
    for (const [a, b] of [
      [
        { taskId: task(), callerId: 'caller-a' },
        { taskId: task(), callerId: 'caller-a' },
      ],
      [
        { taskId: 'shared-task', callerId: 'caller-b' },
        { taskId: 'shared-task', callerId: 'caller-c' },
      ],
    ] as const) {
      const events: string[] = [];
      const gate = createGate();
      const first = admission.withLease(
        a.taskId,
        async () => {
          events.push('first holds');
          await gate.opened;
          events.push('first ends');
        },
        { callerId: a.callerId },
      );
      await eventually(() => (events.includes('first holds') ? true : undefined));
      const second = admission.withLease(b.taskId, async () => void events.push('second holds'), { callerId: b.callerId });
      // Queued on the task key, or (another task) on the caller key.
      await eventually(() => (admission.waiting(b.taskId, { callerId: b.callerId }) === 1 ? true : undefined), 10_000, 'the second lease to queue');
      events.push('second queued');
      gate.open();
      await Promise.all([first, second]);
      expect(events).toEqual(['first holds', 'second queued', 'first ends', 'second holds']);
    }
  });

  it('takes a key shared by the task id and the caller id once', async () => {
    expect(await admission.withLease('message:same', async () => 'once', { callerId: 'same' })).toEqual({ ok: true, value: 'once' });
  });

  it('releases the lease when the holder rejects, and passes the rejection on', async () => {
    const taskId = task();
    const boom = new Error('boom');
    await expect(admission.withLease(taskId, async () => Promise.reject(boom))).rejects.toBe(boom);
    await expect(admission.withMutation(t.ctx, taskId, async () => Promise.reject(boom))).rejects.toBe(boom);
    expect(await admission.withLease(taskId, async () => 'next')).toEqual({ ok: true, value: 'next' });
  });

  it('gives the lock-timeout outcome to a waiter whose budget runs out, and runs nothing of it', async () => {
    const impatient = createTaskAdmission(t.db, { lockTimeoutMs: 150 });
    const taskId = task();
    const key = randomUUID();
    const gate = createGate();
    let held = false;
    const lease = admission.withLease(taskId, async () => {
      held = true;
      await gate.opened;
    });
    await eventually(() => (held ? true : undefined));
    let ran = false;
    expect(await impatient.withLease(taskId, async () => void (ran = true))).toEqual({ ok: false, reason: 'lock_timeout', lockTimeoutMs: 150 });
    expect(await impatient.withMutation(t.ctx, taskId, async (tx) => write(tx, key))).toEqual({ ok: false, reason: 'lock_timeout', lockTimeoutMs: 150 });
    expect(ran).toBe(false);
    expect(admission.waiting(taskId)).toBe(0);
    gate.open();
    await lease;
    expect(await written(key)).toBe(false);
    // The timed-out waiters left nothing behind: the lock is free again.
    expect(await impatient.withLease(taskId, async () => 'free')).toEqual({ ok: true, value: 'free' });
  });

  it('does not let work that outlives its lease pass for the lease holder', async () => {
    const taskId = task();
    const later = createGate();
    let straggler: Promise<unknown> | undefined;
    const events: string[] = [];
    await admission.withLease(taskId, async () => {
      // Started inside the lease, runs after it: it must queue like anyone else.
      straggler = later.opened.then(() => admission.withMutation(t.ctx, taskId, async () => void events.push('straggler runs')));
    });
    const gate = createGate();
    const next = admission.withLease(taskId, async () => {
      events.push('next holds');
      await gate.opened;
      events.push('next ends');
    });
    await eventually(() => (events.includes('next holds') ? true : undefined));
    later.open();
    await eventually(() => (admission.waiting(taskId) === 1 ? true : undefined), 10_000, 'the straggler to queue');
    gate.open();
    await next;
    await straggler;
    expect(events).toEqual(['next holds', 'next ends', 'straggler runs']);
  });
});
