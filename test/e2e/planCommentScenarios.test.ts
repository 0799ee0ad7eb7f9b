import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { topologyFor } from '../../src/contract/subjects.js';
import type { DialectName } from '../../src/repository/dialect.js';
import { createSession } from '../../src/repository/tasks/tasks.js';
import { advisoryLockWaiters } from '../support/advisoryLocks.js';
import { describeEachDialect, isAvailable, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createGate, type Gate } from '../support/gate.js';
import { connectTestNats, deleteTopology, envelope, eventually, natsUrl, uniquePrefix } from '../support/nats.js';
import { acceptanceState, acceptedOnce, seedPlanTask, settledAcceptanceState } from '../support/planComments.js';
import { promptsOnStream } from '../support/promptReceipts.js';
import { spawnWorker, type WorkerProcess } from '../support/workerProcess.js';

const HOOK_SUBJECT = 'test.turn_start';
const encoder = new TextEncoder();

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length) await Promise.resolve(cleanups.pop()!()).catch(() => undefined);
});

interface Ref {
  id: string;
  version: number;
}

/**
 * The scenarios of issue #16 that need a process boundary: real `pending-projector worker` processes
 * on a shared database and a real NATS, with the turn-start hook served by the test. The hook
 * replies at once, unless the test holds it for a caller id (which holds that send's admission
 * lease open between preflight and acceptance), and may run a query of its own first.
 */
async function harness(dialect: DialectName) {
  const t: TestDatabase = await openTestDatabase(dialect, undefined, { file: true });
  cleanups.push(() => t.close());
  const nc: NatsConnection = await connectTestNats();
  cleanups.push(() => nc.drain());
  const held = new Map<string, { gate: Gate; reached: Gate }>();
  let beforeReply: ((request: { task_id: string; caller_id: string }) => Promise<void>) | undefined;

  function serveHook(prefix: string): Subscription {
    const sub = nc.subscribe(`${prefix}${HOOK_SUBJECT}`);
    void (async () => {
      for await (const msg of sub) {
        void (async (m: Msg) => {
          const request = m.json<{ task_id: string; caller_id: string }>();
          const entry = held.get(request.caller_id);
          if (entry) {
            entry.reached.open();
            await entry.gate.opened;
          }
          await beforeReply?.(request);
          m.respond(encoder.encode(JSON.stringify({ ok: true })));
        })(msg);
      }
    })();
    return sub;
  }

  /** A worker process on `t` under its own prefix (so the test chooses which process serves a request). */
  async function start(env: Record<string, string> = {}, prefix = uniquePrefix(`scen_${dialect}`)) {
    const hook = serveHook(prefix);
    const worker: WorkerProcess = await spawnWorker({
      DATABASE_URL: t.url,
      NATS_URL: natsUrl(),
      SUBJECT_PREFIX: prefix,
      BOOT_RECONCILE: 'false',
      TURN_START_HOOK_SUBJECT: HOOK_SUBJECT,
      ADMISSION_LOCK_TIMEOUT_MS: '60000',
      ...env,
    });
    cleanups.push(async () => {
      await worker.stop();
      hook.unsubscribe();
      await deleteTopology(nc, prefix);
    });
    const client: PendingProjectorClient = createPendingProjectorClient(nc, { prefix, timeoutMs: 60_000 });
    return { worker, prefix, client };
  }

  function holdHook(callerId: string) {
    const entry = { gate: createGate(), reached: createGate() };
    held.set(callerId, entry);
    return {
      ...entry,
      release() {
        held.delete(callerId);
        entry.gate.open();
      },
    };
  }

  async function seedComments(client: PendingProjectorClient, n: number) {
    const task = await seedPlanTask(t.ctx);
    const comments: Ref[] = [];
    for (let i = 0; i < n; i++) {
      const reply = await client.createPlanComment({
        task_id: task.taskId,
        plan_id: task.planId,
        comment_id: `c-${randomUUID()}`,
        body: `comment ${i}`,
        selected_text: `line ${i}`,
      });
      if (!reply.ok) throw new Error(JSON.stringify(reply));
      comments.push({ id: reply.comment!.id, version: reply.comment!.version });
    }
    return { ...task, comments };
  }

  const rowsWithId = async (table: string, id: string) => (await t.ctx.knex(table).where({ id })).length;
  const revisionOf = async (taskId: string) => Number((await t.ctx.knex('task_plans').where({ task_id: taskId }).first()).comments_revision);

  return {
    t,
    nc,
    start,
    holdHook,
    seedComments,
    rowsWithId,
    revisionOf,
    setBeforeReply: (fn: typeof beforeReply) => (beforeReply = fn),
  };
}

describeEachDialect('plan-comment scenarios through worker processes on %s', (dialect) => {
  it('kill -9 while the lease is held (hook open): nothing written; another process takes the lease; the retry with the same caller id is accepted once', async () => {
    const h = await harness(dialect);
    const first = await h.start();
    const task = await h.seedComments(first.client, 3);
    const [target, other] = task.comments;
    const callerId = randomUUID();
    const body = { session_id: task.sessionId, caller_id: callerId, content: 'after the crash', plan_comment_refs: [target!] };
    const hook = h.holdHook(callerId);
    // Its reply never comes (the process dies): unavailable, whether the kill or the timeout ends it first.
    const inFlight = first.client.sendMessage(body, { timeoutMs: 3000 });
    await hook.reached.opened;
    const before = await acceptanceState(h.t.ctx, task.taskId);

    let survivor: Awaited<ReturnType<typeof h.start>>;
    if (dialect === 'postgres') {
      // A second process waits for the same task's lease with an edit of another comment.
      survivor = await h.start();
      const editing = survivor.client.updatePlanComment({
        task_id: task.taskId,
        plan_id: task.planId,
        comment_id: other!.id,
        version: 1,
        body: 'edited by the survivor',
      });
      await eventually(async () => ((await advisoryLockWaiters(h.t.db, task.taskId)) > 0 ? true : undefined), 20_000, 'the edit waiting on the lease');
      await first.worker.kill9();
      hook.release();
      // The killed backend's session lock went with its connection: the edit gets the lease (not a lock timeout).
      const edited = await editing;
      expect(edited).toMatchObject({ ok: true, comment: { id: other!.id, version: 2 } });
      const after = await acceptanceState(h.t.ctx, task.taskId);
      expect(after.counts).toEqual(before.counts);
      expect(after.receipts).toEqual(before.receipts);
      expect(after.seq).toEqual(before.seq);
      expect(after.revision).toBe((before.revision as number) + 1);
      expect(after.comments).toEqual(
        (before.comments as Array<{ id: string }>).map((c) => (c.id === other!.id ? { ...c, version: 2, body: 'edited by the survivor' } : c)),
      );
    } else {
      await first.worker.kill9();
      hook.release();
      expect(await acceptanceState(h.t.ctx, task.taskId)).toEqual(before);
      survivor = await h.start();
    }
    expect(await inFlight).toMatchObject({ ok: false, error: { code: 'unavailable' } });
    expect(await h.rowsWithId('task_session_messages', callerId)).toBe(0);
    expect(await h.rowsWithId('queued_messages', callerId)).toBe(0);

    const revision = await h.revisionOf(task.taskId);
    const retried = await survivor.client.sendMessage(body);
    expect(retried).toMatchObject({ ok: true, replayed: false, message_id: callerId, receipt_id: callerId, plan_comments: { revision: revision + 1 } });
    const accepted = await settledAcceptanceState(h.t.ctx, task.taskId);
    expect(await survivor.client.sendMessage(body)).toMatchObject({ ok: true, replayed: true, message_id: callerId });
    expect(await acceptanceState(h.t.ctx, task.taskId)).toEqual(accepted);
    expect(await h.rowsWithId('task_session_messages', callerId)).toBe(1);
    expect(await acceptedOnce(h.t.ctx, callerId)).toBe(1);
    expect(await h.rowsWithId('task_plan_comments', target!.id)).toBe(0);
    expect(await h.revisionOf(task.taskId)).toBe(revision + 1);
  });

  it('a lost reply (the client times out while the hook is held), then the same request through the process: replayed, nothing written', async () => {
    const h = await harness(dialect);
    const { client } = await h.start();
    const task = await h.seedComments(client, 2);
    const callerId = randomUUID();
    const body = { session_id: task.sessionId, caller_id: callerId, content: 'once', plan_comment_refs: [task.comments[0]!] };
    const hook = h.holdHook(callerId);
    expect(await client.sendMessage(body, { timeoutMs: 300 })).toMatchObject({ ok: false, error: { code: 'unavailable' } });
    await hook.reached.opened;
    hook.release();
    await eventually(async () => ((await acceptedOnce(h.t.ctx, callerId)) === 1 ? true : undefined), 20_000, 'the accepted send');
    const after = await settledAcceptanceState(h.t.ctx, task.taskId);
    expect(await client.sendMessage(body)).toMatchObject({
      ok: true,
      replayed: true,
      message_id: callerId,
      receipt_id: callerId,
      plan_comments: { revision: 3 },
    });
    expect(await acceptanceState(h.t.ctx, task.taskId)).toEqual(after);
    expect(await h.rowsWithId('task_session_messages', callerId)).toBe(1);
  });

  it('session create, delete and primary promotion never change the collection: plan_comment.list is byte-equal, revision included', async () => {
    const h = await harness(dialect);
    const { client, prefix } = await h.start();
    const task = await h.seedComments(client, 3);
    const topology = topologyFor(prefix);
    const js = jetstream(h.nc);
    const jsm = await jetstreamManager(h.nc);
    const list = async () =>
      (await h.nc.request(topology.serviceSubject('plan_comment.list'), encoder.encode(JSON.stringify({ task_id: task.taskId })), { timeout: 20_000 })).data;
    /** Publishes a Kandev event into the worker's stream and waits until the worker acknowledged it. */
    const projected = async (type: string, data: Record<string, unknown>) => {
      const ack = await js.publish(`${prefix}${type}`, envelope(type, data));
      await eventually(
        async () => {
          const info = await jsm.consumers.info(topology.eventsStream, topology.consumer);
          return info.ack_floor.stream_seq >= ack.seq && info.num_ack_pending === 0 ? true : undefined;
        },
        20_000,
        `the worker to project ${type}`,
      );
    };
    const snapshot = await list();
    expect(JSON.parse(new TextDecoder().decode(snapshot))).toMatchObject({ ok: true, plan_comments: { revision: 3 } });

    const created = await createSession(h.t.ctx, { taskId: task.taskId, state: 'IDLE', isPrimary: false });
    await projected('task_session.state_changed', { task_id: task.taskId, session_id: created.id, new_state: 'IDLE' });
    expect(Buffer.from(await list())).toEqual(Buffer.from(snapshot));

    await h.t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ is_primary: 0 });
    await h.t.ctx.knex('task_sessions').where({ id: created.id }).update({ is_primary: 1 });
    await projected('task.updated', { task_id: task.taskId });
    expect(Buffer.from(await list())).toEqual(Buffer.from(snapshot));

    await h.t.ctx.knex('task_sessions').where({ id: task.sessionId }).delete();
    await projected('task_session.state_changed', { task_id: task.taskId, session_id: task.sessionId, new_state: 'DELETED' });
    expect(Buffer.from(await list())).toEqual(Buffer.from(snapshot));
  });
});

// PostgreSQL only: SQLite serves admission from one process (the lease is in-process there).
describe.skipIf(!isAvailable('postgres'))('plan-comment load through worker processes on postgres', () => {
  const dialect: DialectName = 'postgres';
  it('2 worker processes x 50 comment-bearing sends over 4 tasks of 25 promptable sessions: one message and receipt per accepted send, no comment consumed twice, no hook run for a send then refused', async () => {
    const h = await harness(dialect);
    const workers = [await h.start(), await h.start()];
    const tasks: Array<Awaited<ReturnType<typeof h.seedComments>> & { sessions: string[] }> = [];
    for (let k = 0; k < 4; k++) {
      const task = await h.seedComments(workers[k % 2]!.client, 30);
      // One session per send: a delivered send claims only its own session RUNNING, so every send meets a
      // promptable session and contends on its task's comments alone (one session per task would turn most
      // sends away as session_unavailable before they reached the comments, lease or not).
      const sessions = [task.sessionId];
      for (let s = 1; s < 25; s++) sessions.push((await createSession(h.t.ctx, { taskId: task.taskId, state: 'IDLE', isPrimary: false })).id);
      tasks.push({ ...task, sessions });
    }
    const hooked = new Map<string, number>();
    h.setBeforeReply(async (request) => {
      hooked.set(request.caller_id, (hooked.get(request.caller_id) ?? 0) + 1);
    });
    // Send i goes to task i % 4, its own session, with two refs; neighbours on a task overlap in one comment half the time.
    const sends = Array.from({ length: 100 }, (_, i) => {
      const task = tasks[i % 4]!;
      const n = Math.floor(i / 4);
      const j = n % 2 === 0 ? n : n - 1;
      const refs = [task.comments[j % 30]!, task.comments[(j + 1 + (n % 2)) % 30]!];
      return { task, worker: workers[i % 2]!, body: { session_id: task.sessions[n]!, caller_id: randomUUID(), content: `send ${i}`, plan_comment_refs: refs } };
    });
    const replies = await Promise.all(sends.map((s) => s.worker.client.sendMessage(s.body)));

    const consumed = new Map<string, string>();
    for (const [i, reply] of replies.entries()) {
      const { body } = sends[i]!;
      if (!reply.ok) {
        expect(reply).toMatchObject({ error: { code: 'conflict' }, reason: 'plan_comments_changed' });
        // The lease's promise: held from the preflight to the COMMIT, so a send whose comments another
        // send consumed learns it in its preflight, before the turn-start hook (a turn started for a
        // prompt that never comes). Without it, both pass the preflight, both hooks run, one loses.
        expect(hooked.get(body.caller_id), `hook calls of refused send ${i}`).toBeUndefined();
        expect(await h.rowsWithId('task_session_messages', body.caller_id)).toBe(0);
        expect(await h.rowsWithId('queued_messages', body.caller_id)).toBe(0);
        continue;
      }
      expect(reply).toMatchObject({ replayed: false, message_id: body.caller_id });
      expect(hooked.get(body.caller_id)).toBe(1);
      expect(await h.rowsWithId('task_session_messages', body.caller_id)).toBe(1);
      expect(await acceptedOnce(h.t.ctx, body.caller_id)).toBe(1);
      for (const ref of body.plan_comment_refs) {
        expect(consumed.get(ref.id)).toBeUndefined();
        consumed.set(ref.id, body.caller_id);
        expect(await h.rowsWithId('task_plan_comments', ref.id)).toBe(0);
      }
    }
    const accepted = replies.filter((r) => r.ok).length;
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(100);
    for (const task of tasks) {
      const acceptedHere = replies.filter((r, i) => r.ok && sends[i]!.task === task).length;
      const messages = await h.t.ctx.knex('task_session_messages').whereIn('task_session_id', task.sessions);
      expect(messages).toHaveLength(acceptedHere);
      // 30 creates, then one change per accepted send.
      expect(await h.revisionOf(task.taskId)).toBe(30 + acceptedHere);
      const remaining = await h.t.ctx.knex('task_plan_comments').where({ task_id: task.taskId });
      expect(remaining).toHaveLength(30 - task.comments.filter((c) => consumed.has(c.id)).length);
      // Delivered (by either worker, each under its own prefix) or still on its way: never a prompt
      // twice, never one that was not accepted.
      const prompted: Array<string | undefined> = [];
      for (const w of workers) for (const session of task.sessions) prompted.push(...(await promptsOnStream(h.nc, w.prefix, session)).map((p) => p.receiptId));
      expect(new Set(prompted).size).toBe(prompted.length);
      const acceptedIds = new Set<string>(sends.filter((s, i) => replies[i]!.ok && s.task === task).map((s) => s.body.caller_id));
      for (const id of prompted) expect(acceptedIds.has(id!)).toBe(true);
    }
  });

  it('DB_MAX_CONNECTIONS=2, 20 comment-bearing sends on 20 tasks at once whose hooks query the database: all accepted, no pool timeout', async () => {
    const h = await harness(dialect);
    const { client } = await h.start({ DB_MAX_CONNECTIONS: '2' });
    const tasks: Awaited<ReturnType<typeof h.seedComments>>[] = [];
    for (let k = 0; k < 20; k++) tasks.push(await h.seedComments(client, 1));
    const queried = new Set<string>();
    h.setBeforeReply(async (request) => {
      const rows = await h.t.ctx.knex('task_plan_comments').where({ task_id: request.task_id });
      if (rows.length === 1) queried.add(request.task_id);
    });
    const replies = await Promise.all(
      tasks.map((task) => client.sendMessage({ session_id: task.sessionId, caller_id: randomUUID(), content: 'go', plan_comment_refs: task.comments })),
    );
    expect(replies.map((r) => (r.ok ? 'ok' : JSON.stringify(r)))).toEqual(tasks.map(() => 'ok'));
    expect(queried.size).toBe(20);
    for (const task of tasks) expect(await h.revisionOf(task.taskId)).toBe(2);
  });
});
