import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdmissionPoolTooSmallError, createTaskAdmission, type TaskAdmission } from '../../src/repository/admission/taskAdmission.js';
import { createRepositoryContext, beginOrJoin, type RepositoryContext } from '../../src/repository/context.js';
import { createDatabase, type Database } from '../../src/repository/database.js';
import { withReservedConnection } from '../../src/repository/driver/reservedConnection.js';
import { isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { advisoryLockHolder, advisoryLockWaiters } from '../support/advisoryLocks.js';
import { spawnAdmissionHolder, type AdmissionProcess } from '../support/admissionProcess.js';
import { createGate } from '../support/gate.js';
import { eventually } from '../support/nats.js';

/**
 * PostgreSQL only: the lease across pools and processes (the advisory locks on the server), its
 * lock timeout, a lock connection whose unlock failed, and the pool rules (at least two
 * connections; at most pool − 1 lock connections).
 */
describe.skipIf(!isAvailable('postgres'))('the task admission lease across PostgreSQL backends', () => {
  let t: TestDatabase;
  let other: Database;
  let admission: TaskAdmission;
  let beside: TaskAdmission;
  const holders: AdmissionProcess[] = [];
  beforeAll(async () => {
    t = await openTestDatabase('postgres');
    // Another pool on the same schema, as another process would open it: its in-process locks are
    // its own, so everything between the two meets on the server.
    other = createDatabase(t.url, { maxConnections: 3 });
    admission = createTaskAdmission(t.db, { lockTimeoutMs: 10_000 });
    beside = createTaskAdmission(other, { lockTimeoutMs: 10_000 });
  });
  afterAll(async () => {
    for (const holder of holders) await holder.kill9();
    await other?.destroy();
    await t?.close();
  });

  const task = () => `task-${randomUUID()}`;
  const write = (ctx: RepositoryContext, key: string) => ctx.knex('kandev_meta').insert({ key, value: 'written' });
  const written = async (key: string) => (await t.ctx.knex('kandev_meta').where({ key }).first()) !== undefined;
  const waitersOn = (key: string, count: number) =>
    eventually(async () => ((await advisoryLockWaiters(t.db, key)) === count ? true : undefined), 15_000, `${count} waiter(s) on ${key}`);
  const holder = (env: { TASK_ID: string; CALLER_ID?: string }) => {
    const process = spawnAdmissionHolder({ DATABASE_URL: t.url, ...env });
    holders.push(process);
    return process;
  };

  it("makes one pool's mutation wait for another pool's lease: a session-level and a transaction-level lock on one key conflict", async () => {
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
    const mutation = beside.withMutation(createRepositoryContext(other), taskId, async (tx) => {
      events.push('mutation runs');
      await write(tx, key);
    });
    // Its pg_advisory_xact_lock waits on the server for the lease's pg_advisory_lock.
    await waitersOn(taskId, 1);
    expect(await written(key)).toBe(false);
    gate.open();
    await lease;
    expect(await mutation).toEqual({ ok: true, value: undefined });
    expect(events).toEqual(['lease holds', 'lease ends', 'mutation runs']);
    expect(await written(key)).toBe(true);
  });

  it("makes one pool's lease wait for another pool's mutation until it committed", async () => {
    const taskId = task();
    const key = randomUUID();
    const events: string[] = [];
    const gate = createGate();
    const mutation = beside.withMutation(createRepositoryContext(other), taskId, async (tx) => {
      await write(tx, key);
      events.push('mutation holds');
      await gate.opened;
    });
    await eventually(() => (events.includes('mutation holds') ? true : undefined));
    const lease = admission.withLease(taskId, async () => {
      events.push(`lease sees the mutation: ${await written(key)}`);
    });
    await waitersOn(taskId, 1);
    gate.open();
    await mutation;
    expect(await lease).toEqual({ ok: true, value: undefined });
    expect(events).toEqual(['mutation holds', 'lease sees the mutation: true']);
  });

  it('makes a lease wait for the lease another process holds, and take it once that one is released', async () => {
    const taskId = task();
    const process = holder({ TASK_ID: taskId });
    await process.printed('held');
    const events: string[] = [];
    const lease = admission.withLease(taskId, async () => void events.push('lease runs'));
    await waitersOn(taskId, 1);
    events.push('waiting for the other process');
    expect(await process.release()).toBe(0);
    expect(await lease).toEqual({ ok: true, value: undefined });
    expect(events).toEqual(['waiting for the other process', 'lease runs']);
  });

  it("serializes one caller id across processes even on another task (R20b: the key 'message:' || caller id)", async () => {
    const callerId = `caller-${randomUUID()}`;
    const process = holder({ TASK_ID: task(), CALLER_ID: callerId });
    await process.printed('held');
    const events: string[] = [];
    const lease = admission.withLease(task(), async () => void events.push('lease runs'), { callerId });
    await waitersOn(`message:${callerId}`, 1);
    events.push('waiting for the other process');
    expect(await process.release()).toBe(0);
    await lease;
    expect(events).toEqual(['waiting for the other process', 'lease runs']);
  });

  it('gives the lock-timeout outcome to a lease or mutation that waits past ADMISSION_LOCK_TIMEOUT_MS on the server, writing nothing, and leaves no lock_timeout behind', async () => {
    const taskId = task();
    const key = randomUUID();
    const process = holder({ TASK_ID: taskId });
    await process.printed('held');
    const impatient = createTaskAdmission(t.db, { lockTimeoutMs: 300 });
    let ran = false;
    expect(await impatient.withLease(taskId, async () => void (ran = true))).toEqual({ ok: false, reason: 'lock_timeout', lockTimeoutMs: 300 });
    expect(await impatient.withMutation(t.ctx, taskId, async (tx) => write(tx, key))).toEqual({ ok: false, reason: 'lock_timeout', lockTimeoutMs: 300 });
    expect(ran).toBe(false);
    expect(await written(key)).toBe(false);
    expect(await advisoryLockWaiters(t.db, taskId)).toBe(0);
    // Every connection of the pool is back at the server's lock_timeout.
    const settings = await Promise.all(
      Array.from({ length: t.db.maxConnections }, () =>
        withReservedConnection(
          t.db.knex,
          t.db.dialect,
          async (connection) => (await connection.raw<{ lock_timeout: string }>('SHOW lock_timeout'))[0]!.lock_timeout,
        ),
      ),
    );
    expect(new Set(settings)).toEqual(new Set(['0']));
    expect(await process.release()).toBe(0);
    expect(await impatient.withLease(taskId, async () => 'free')).toEqual({ ok: true, value: 'free' });
  });

  it('lets another process take the lease at once after the process holding it was killed with SIGKILL', async () => {
    const taskId = task();
    const callerId = `caller-${randomUUID()}`;
    const process = holder({ TASK_ID: taskId, CALLER_ID: callerId });
    await process.printed('held');
    const impatient = createTaskAdmission(t.db, { lockTimeoutMs: 200 });
    expect(await impatient.withLease(taskId, async () => 'held elsewhere')).toMatchObject({ ok: false, reason: 'lock_timeout' });
    await process.kill9();
    // The server drops a session's advisory locks with its connection: no lease expiry to wait out.
    expect(await admission.withLease(taskId, async () => 'taken', { callerId })).toEqual({ ok: true, value: 'taken' });
    expect(process.output()).not.toContain('released');
  });

  it('closes a lock connection whose unlock failed and never lends it out again', async () => {
    const pool = createDatabase(t.url, { maxConnections: 3 });
    const warnings: string[] = [];
    try {
      const guarded = createTaskAdmission(pool, { lockTimeoutMs: 10_000, onWarning: (message) => warnings.push(message) });
      const taskId = task();
      let killed: number | undefined;
      const outcome = await guarded.withLease(taskId, async () => {
        killed = await advisoryLockHolder(t.db, taskId);
        // From another pool, as an administrator would: the lock connection's backend ends.
        await t.db.knex.raw('SELECT pg_terminate_backend(?)', [killed!]);
        await eventually(async () => ((await advisoryLockHolder(t.db, taskId)) === undefined ? true : undefined));
        return 'the holder finished';
      });
      expect(outcome).toEqual({ ok: true, value: 'the holder finished' });
      expect(killed).toBeTypeOf('number');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(`admission lease of task ${JSON.stringify(taskId)}: advisory unlock failed`);
      // Every connection the pool can lend at once: none is the terminated one.
      const pids = await Promise.all(
        Array.from({ length: pool.maxConnections }, () =>
          withReservedConnection(
            pool.knex,
            pool.dialect,
            async (connection) => (await connection.raw<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]!.pid,
          ),
        ),
      );
      expect(pids).not.toContain(killed);
      expect(await guarded.withLease(taskId, async () => 'again')).toEqual({ ok: true, value: 'again' });
    } finally {
      await pool.destroy();
    }
  });

  it('refuses a pool of one connection with ADMISSION_POOL_TOO_SMALL, and accepts two', async () => {
    const single = createDatabase(t.url, { maxConnections: 1 });
    const two = createDatabase(t.url, { maxConnections: 2 });
    try {
      expect(() => createTaskAdmission(single, { lockTimeoutMs: 1000 })).toThrow(AdmissionPoolTooSmallError);
      expect(() => createTaskAdmission(single, { lockTimeoutMs: 1000 })).toThrow(expect.objectContaining({ code: 'ADMISSION_POOL_TOO_SMALL' }));
      expect(createTaskAdmission(two, { lockTimeoutMs: 1000 }).lockTimeoutMs).toBe(1000);
    } finally {
      await single.destroy();
      await two.destroy();
    }
  });

  it('completes 20 leases on 20 tasks whose hooks use the database on a pool of 2, holding one lock connection at a time', async () => {
    const pool = createDatabase(t.url, { maxConnections: 2 });
    try {
      const small = createTaskAdmission(pool, { lockTimeoutMs: 20_000 });
      const ctx = createRepositoryContext(pool);
      const tasks = Array.from({ length: 20 }, task);
      const run = randomUUID();
      const outcomes = await Promise.all(
        tasks.map((taskId, i) =>
          small.withLease(taskId, () =>
            // The hook's own transaction, on the pool's other connection.
            beginOrJoin(ctx, async (tx) => {
              await write(tx, `${run}-${i}`);
              const [row] = (
                await tx.knex.raw(
                  `SELECT count(*)::int AS held FROM pg_locks
                  WHERE locktype = 'advisory' AND granted AND objsubid = 1
                    AND ((classid::bigint << 32) | objid::bigint) IN (SELECT hashtextextended(k, 0) FROM unnest(?::text[]) AS k)`,
                  [tasks],
                )
              ).rows as Array<{ held: number }>;
              return row!.held;
            }),
          ),
        ),
      );
      expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
      // Each hook saw exactly its own lease's lock: the semaphore let one lock connection out at a time.
      expect(outcomes.map((outcome) => (outcome.ok ? outcome.value : -1))).toEqual(tasks.map(() => 1));
      expect(await t.ctx.knex('kandev_meta').where('key', 'like', `${run}-%`).count({ n: '*' })).toEqual([{ n: 20 }]);
    } finally {
      await pool.destroy();
    }
  });
});
