import { randomUUID } from 'node:crypto';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPendingProjectorClient, type PendingProjectorClient } from '../../src/client/pendingProjectorClient.js';
import { PLAN_COMMENTS_CHANGED } from '../../src/contract/subjects.js';
import { silentLogger } from '../../src/logger.js';
import { createSession } from '../../src/repository/tasks/tasks.js';
import { startWorker, type WorkerHandle } from '../../src/bin/worker.js';
import type { PlanCommentsPayload } from '../../src/contract/planCommentPayloads.js';
import { collectEvents } from '../support/busEvents.js';
import { describeEachDialect, openTestDatabase, type TestDatabase } from '../support/databases.js';
import { createGate, type Gate } from '../support/gate.js';
import { connectTestNats, deleteTopology, eventually, uniquePrefix } from '../support/nats.js';
import { seedPlanTask, settledAcceptanceState } from '../support/planComments.js';
import { testWorkerConfig } from '../support/workerConfig.js';

const HOOK_SUBJECT = 'test.turn_start';
const encoder = new TextEncoder();

/**
 * The plan-comment, message.send and Run endpoints through the typed client against a real worker
 * on a real NATS, with a turn-start hook served by the test: it replies at once unless the test
 * holds it for a caller id (a gate), which holds that send's admission lease open.
 */
describeEachDialect('plan-comment endpoints over a real NATS on %s', (dialect) => {
  let t: TestDatabase;
  let nc: NatsConnection;
  let worker: WorkerHandle;
  let prefix: string;
  let client: PendingProjectorClient;
  let bus: ReturnType<typeof collectEvents>;
  let hookSub: Subscription;
  const held = new Map<string, { gate: Gate; reached: Gate }>();
  const refusedByHook = new Set<string>();

  const eventsOf = (taskId: string) =>
    bus
      .ofType(PLAN_COMMENTS_CHANGED)
      .filter((e) => e.data.task_id === taskId)
      .map((e) => e.data as unknown as PlanCommentsPayload);
  const eventAt = (taskId: string, revision: number) =>
    eventually(() => eventsOf(taskId).find((e) => e.revision === revision), 10_000, `the comments.changed event of revision ${revision}`);

  /** The test's turn-start hook: replies at once, unless the caller id is held or refused. */
  function serveHook(subject: string): Subscription {
    const sub = nc.subscribe(subject);
    void (async () => {
      for await (const msg of sub) {
        void (async (m: Msg) => {
          const request = m.json<{ caller_id: string }>();
          const entry = held.get(request.caller_id);
          if (entry) {
            entry.reached.open();
            await entry.gate.opened;
          }
          m.respond(encoder.encode(JSON.stringify(refusedByHook.has(request.caller_id) ? { ok: false, error: 'not now' } : { ok: true })));
        })(msg);
      }
    })();
    return sub;
  }

  function holdHook(callerId: string) {
    const entry = { gate: createGate(), reached: createGate() };
    held.set(callerId, entry);
    return entry;
  }

  async function seedComments(n: number) {
    const task = await seedPlanTask(t.ctx);
    const comments = [];
    for (let i = 0; i < n; i++) {
      const reply = await client.createPlanComment({
        task_id: task.taskId,
        plan_id: task.planId,
        comment_id: `c-${randomUUID()}`,
        body: `comment ${i}`,
        selected_text: `line ${i}`,
      });
      if (!reply.ok) throw new Error(JSON.stringify(reply));
      comments.push(reply.comment!);
    }
    return { ...task, comments };
  }

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    nc = await connectTestNats();
    prefix = uniquePrefix(`plans_${dialect}`);
    bus = collectEvents(nc, prefix, [PLAN_COMMENTS_CHANGED]);
    hookSub = serveHook(`${prefix}${HOOK_SUBJECT}`);
    worker = await startWorker({
      db: t.db,
      nc,
      config: testWorkerConfig(prefix, { turnStartHookSubject: HOOK_SUBJECT, admissionLockTimeoutMs: 20_000 }),
      logger: silentLogger(),
    });
    client = createPendingProjectorClient(nc, { prefix, timeoutMs: 30_000 });
  });
  afterAll(async () => {
    await worker?.stop();
    hookSub?.unsubscribe();
    bus?.stop();
    await deleteTopology(nc, prefix);
    await nc?.drain();
    await t?.close();
  });

  it('list, create, update, delete and plan.delete reply with the new collection, and each change publishes that same collection', async () => {
    const task = await seedPlanTask(t.ctx);
    const empty = await client.listPlanComments({ task_id: task.taskId });
    expect(empty).toEqual({ ok: true, plan_comments: { task_id: task.taskId, plan_id: task.planId, revision: 0, comments: [] } });

    const created = await client.createPlanComment({
      task_id: task.taskId,
      plan_id: task.planId,
      comment_id: 'k1-' + task.taskId,
      body: 'tighten step 2',
      selected_text: '2. test',
      anchor_from: 12,
      anchor_to: 19,
    });
    if (!created.ok) throw new Error(JSON.stringify(created));
    expect(created.replayed).toBe(false);
    expect(created.plan_comments.revision).toBe(1);
    expect(created.comment).toMatchObject({ body: 'tighten step 2', selected_text: '2. test', anchor_from: 12, anchor_to: 19, version: 1 });
    expect(await eventAt(task.taskId, 1)).toEqual(created.plan_comments);

    const replay = await client.createPlanComment({
      task_id: task.taskId,
      plan_id: task.planId,
      comment_id: 'k1-' + task.taskId,
      body: 'tighten step 2',
      selected_text: '2. test',
      anchor_from: 12,
      anchor_to: 19,
    });
    expect(replay).toMatchObject({ ok: true, replayed: true, plan_comments: { revision: 1 } });
    const clash = await client.createPlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: 'k1-' + task.taskId, body: 'something else' });
    expect(clash).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'comment_id_conflict' });

    const updated = await client.updatePlanComment({
      task_id: task.taskId,
      plan_id: task.planId,
      comment_id: 'k1-' + task.taskId,
      version: 1,
      body: 'tighten step 2, please',
    });
    if (!updated.ok) throw new Error(JSON.stringify(updated));
    expect(updated.comment).toMatchObject({ version: 2, body: 'tighten step 2, please' });
    expect(updated.plan_comments.revision).toBe(2);
    expect(await eventAt(task.taskId, 2)).toEqual(updated.plan_comments);

    const stale = await client.updatePlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: 'k1-' + task.taskId, version: 1, body: 'late' });
    expect(stale).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'plan_comments_changed', plan_comments: updated.plan_comments });
    const staleDelete = await client.deletePlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: 'k1-' + task.taskId, version: 1 });
    expect(staleDelete).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'plan_comments_changed' });

    const deleted = await client.deletePlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: 'k1-' + task.taskId, version: 2 });
    expect(deleted).toMatchObject({ ok: true, deleted: true, plan_comments: { revision: 3, comments: [] } });
    expect(await eventAt(task.taskId, 3)).toEqual((deleted as { plan_comments: PlanCommentsPayload }).plan_comments);
    // Deleted: a replayed create never brings it back.
    const afterDelete = await client.createPlanComment({
      task_id: task.taskId,
      plan_id: task.planId,
      comment_id: 'k1-' + task.taskId,
      body: 'tighten step 2',
      selected_text: '2. test',
      anchor_from: 12,
      anchor_to: 19,
    });
    expect(afterDelete).toMatchObject({ ok: true, replayed: true, comment: null, plan_comments: { revision: 3, comments: [] } });

    await client.createPlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: 'k2-' + task.taskId, body: 'another' });
    const gone = await client.deletePlan({ task_id: task.taskId, plan_id: task.planId });
    expect(gone).toEqual({ ok: true, deleted: true, plan_comments: { task_id: task.taskId, plan_id: null, revision: 0, comments: [] } });
    const last = await eventually(() => eventsOf(task.taskId).find((e) => e.plan_id === null), 10_000, 'the plan.delete event');
    expect(last).toEqual({ task_id: task.taskId, plan_id: null, revision: 0, comments: [] });
    expect(await client.deletePlan({ task_id: task.taskId, plan_id: task.planId })).toMatchObject({ ok: true, deleted: false });
    expect(await client.listPlanComments({ task_id: 'no-such-task' })).toMatchObject({ ok: false, error: { code: 'not_found' }, reason: 'task_not_found' });
  });

  it('a send carrying 5 of 7 comments consumes exactly those, and the event shows the new revision', async () => {
    const task = await seedComments(7);
    const refs = task.comments.slice(0, 5).map((c) => ({ id: c.id, version: c.version }));
    const callerId = randomUUID();
    const reply = await client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: 'please apply', plan_comment_refs: refs });
    if (!reply.ok) throw new Error(JSON.stringify(reply));
    expect(reply).toMatchObject({
      task_id: task.taskId,
      session_id: task.sessionId,
      caller_id: callerId,
      receipt_id: callerId,
      message_id: callerId,
      replayed: false,
      delivery: 'pending',
    });
    expect(reply.plan_comments!.revision).toBe(8);
    expect(reply.plan_comments!.comments.map((c) => c.id)).toEqual(task.comments.slice(5).map((c) => c.id));
    expect(await eventAt(task.taskId, 8)).toEqual(reply.plan_comments);
    const message = await t.ctx.knex('task_session_messages').where({ id: callerId }).first();
    expect(message.author_type).toBe('user');
    for (const c of task.comments.slice(0, 5)) expect(String(message.content)).toContain(c.selected_text);
    expect(String(message.content)).toContain('please apply');
    expect(String(message.content)).not.toContain('comment 5');
  });

  it('replay with the same caller id returns replayed and writes nothing; another request under it is caller_id_conflict', async () => {
    const task = await seedComments(2);
    const callerId = randomUUID();
    const body = { session_id: task.sessionId, caller_id: callerId, content: 'go', plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }] };
    const first = await client.sendMessage(body);
    expect(first).toMatchObject({ ok: true, replayed: false });
    const before = await settledAcceptanceState(t.ctx, task.taskId);
    const again = await client.sendMessage(body);
    expect(again).toMatchObject({ ok: true, replayed: true, message_id: callerId, receipt_id: callerId });
    const other = await client.sendMessage({ ...body, content: 'something else' });
    expect(other).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'caller_id_conflict' });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);
  });

  it('Run goes to the primary session, Send to exactly the session named; a session_id in Run is bad_request', async () => {
    const task = await seedComments(2);
    const other = await createSession(t.ctx, { taskId: task.taskId, state: 'IDLE', isPrimary: false });
    const send = await client.sendMessage({
      session_id: other.id,
      caller_id: randomUUID(),
      content: 'to the side',
      plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }],
    });
    expect(send).toMatchObject({ ok: true, session_id: other.id });
    const before = await settledAcceptanceState(t.ctx, task.taskId);
    const refused = await client.runPlanComments({
      task_id: task.taskId,
      caller_id: randomUUID(),
      plan_comment_refs: [{ id: task.comments[1]!.id, version: 1 }],
      session_id: other.id,
    } as never);
    expect(refused).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);
    const run = await client.runPlanComments({ task_id: task.taskId, caller_id: randomUUID(), plan_comment_refs: [{ id: task.comments[1]!.id, version: 1 }] });
    expect(run).toMatchObject({ ok: true, session_id: task.sessionId, plan_comments: { comments: [] } });
  });

  it('with the hook held, an edit of a referenced comment waits on the lease, then the send commits and the edit gets a stale-version conflict', async () => {
    const task = await seedComments(2);
    const target = task.comments[0]!;
    const callerId = randomUUID();
    const hook = holdHook(callerId);
    const sending = client.sendMessage({ session_id: task.sessionId, caller_id: callerId, content: 'now', plan_comment_refs: [{ id: target.id, version: 1 }] });
    await hook.reached.opened;
    let editSettled = false;
    const editing = client
      .updatePlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: target.id, version: 1, body: 'edited meanwhile' })
      .finally(() => (editSettled = true));
    // A request after the edit on the same connection: the edit reached the worker before this reply.
    expect(await client.listPlanComments({ task_id: task.taskId })).toMatchObject({ ok: true, plan_comments: { revision: 2 } });
    expect(editSettled).toBe(false);
    hook.gate.open();
    const [sent, edited] = await Promise.all([sending, editing]);
    expect(sent).toMatchObject({ ok: true, replayed: false, plan_comments: { revision: 3 } });
    expect(edited).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'plan_comments_changed', plan_comments: { revision: 3 } });
    const message = await t.ctx.knex('task_session_messages').where({ id: callerId }).first();
    expect(String(message.content)).toContain('comment 0');
    expect(String(message.content)).not.toContain('edited meanwhile');
  });

  it("a send and a plan.delete serialize: with the send's hook held the delete waits, the send consumes its comment, then the plan goes", async () => {
    const task = await seedComments(2);
    const callerId = randomUUID();
    const hook = holdHook(callerId);
    const sending = client.sendMessage({
      session_id: task.sessionId,
      caller_id: callerId,
      content: 'now',
      plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }],
    });
    await hook.reached.opened;
    let deleteSettled = false;
    const deleting = client.deletePlan({ task_id: task.taskId, plan_id: task.planId }).finally(() => (deleteSettled = true));
    // A request after the delete on the same connection: the delete reached the worker before this reply.
    expect(await client.listPlanComments({ task_id: task.taskId })).toMatchObject({ ok: true, plan_comments: { revision: 2 } });
    expect(deleteSettled).toBe(false);
    hook.gate.open();
    const [sent, deleted] = await Promise.all([sending, deleting]);
    expect(sent).toMatchObject({ ok: true, replayed: false, plan_comments: { revision: 3, comments: [{ id: task.comments[1]!.id }] } });
    expect(deleted).toMatchObject({ ok: true, deleted: true, plan_comments: { plan_id: null, comments: [] } });
    const message = await t.ctx.knex('task_session_messages').where({ id: callerId }).first();
    expect(String(message.content)).toContain('comment 0');
    expect(Number((await t.ctx.knex('task_plan_comments').where({ task_id: task.taskId }).count({ n: '*' }).first())!.n)).toBe(0);
  });

  it('a turn-start hook that never replies: unavailable after TURN_START_HOOK_TIMEOUT_MS, nothing written, the lease free again', async () => {
    const silentPrefix = uniquePrefix(`plans_silent_${dialect}`);
    // A hook that takes every request and answers none.
    const silentHook = nc.subscribe(`${silentPrefix}${HOOK_SUBJECT}`);
    const silent = await startWorker({
      db: t.db,
      nc,
      config: testWorkerConfig(silentPrefix, { turnStartHookSubject: HOOK_SUBJECT, turnStartHookTimeoutMs: 300 }),
      logger: silentLogger(),
    });
    try {
      const silentClient = createPendingProjectorClient(nc, { prefix: silentPrefix, timeoutMs: 30_000 });
      const task = await seedComments(1);
      const before = await settledAcceptanceState(t.ctx, task.taskId);
      const body = { session_id: task.sessionId, caller_id: randomUUID(), content: 'x', plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }] };
      expect(await silentClient.sendMessage(body)).toMatchObject({
        ok: false,
        error: { code: 'unavailable' },
        reason: 'turn_start_hook_failed',
        hook_reason: 'timeout',
      });
      expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);
      // The lease was released: an edit on the task goes through at once.
      expect(
        await silentClient.updatePlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: task.comments[0]!.id, version: 1, body: 'edited' }),
      ).toMatchObject({ ok: true });
    } finally {
      await silent.stop();
      silentHook.unsubscribe();
      await deleteTopology(nc, silentPrefix);
    }
  });

  it('a failing turn-start hook replies unavailable and writes nothing; the same request is accepted once the hook agrees', async () => {
    const task = await seedComments(1);
    const callerId = randomUUID();
    refusedByHook.add(callerId);
    const before = await settledAcceptanceState(t.ctx, task.taskId);
    const body = { session_id: task.sessionId, caller_id: callerId, content: 'x', plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }] };
    expect(await client.sendMessage(body)).toMatchObject({
      ok: false,
      error: { code: 'unavailable' },
      reason: 'turn_start_hook_failed',
      hook_reason: 'rejected',
    });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);
    refusedByHook.delete(callerId);
    expect(await client.sendMessage(body)).toMatchObject({ ok: true, replayed: false });
  });

  it('Run versus a primary promotion committed while its hook is held: primary_session_changed, comments intact', async () => {
    const task = await seedComments(2);
    const other = await createSession(t.ctx, { taskId: task.taskId, state: 'IDLE', isPrimary: false });
    const callerId = randomUUID();
    const hook = holdHook(callerId);
    const running = client.runPlanComments({ task_id: task.taskId, caller_id: callerId, plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }] });
    await hook.reached.opened;
    await t.ctx.knex('task_sessions').where({ id: task.sessionId }).update({ is_primary: 0 });
    await t.ctx.knex('task_sessions').where({ id: other.id }).update({ is_primary: 1 });
    const before = await settledAcceptanceState(t.ctx, task.taskId);
    hook.gate.open();
    expect(await running).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'primary_session_changed', primary_session_id: other.id });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);
    expect(await client.listPlanComments({ task_id: task.taskId })).toMatchObject({
      ok: true,
      plan_comments: { revision: 2, comments: [{ id: task.comments[0]!.id }, { id: task.comments[1]!.id }] },
    });
  });

  it('a change that waits on a held lease past ADMISSION_LOCK_TIMEOUT_MS replies unavailable lock_timeout and writes nothing', async () => {
    const shortPrefix = uniquePrefix(`plans_short_${dialect}`);
    const shortHook = serveHook(`${shortPrefix}${HOOK_SUBJECT}`);
    const short = await startWorker({
      db: t.db,
      nc,
      config: testWorkerConfig(shortPrefix, { turnStartHookSubject: HOOK_SUBJECT, admissionLockTimeoutMs: 200 }),
      logger: silentLogger(),
    });
    try {
      const shortClient = createPendingProjectorClient(nc, { prefix: shortPrefix, timeoutMs: 30_000 });
      const task = await seedComments(1);
      const callerId = randomUUID();
      const hook = holdHook(callerId);
      const sending = shortClient.sendMessage({
        session_id: task.sessionId,
        caller_id: callerId,
        content: 'x',
        plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }],
      });
      await hook.reached.opened;
      const before = await settledAcceptanceState(t.ctx, task.taskId);
      const edit = await shortClient.updatePlanComment({
        task_id: task.taskId,
        plan_id: task.planId,
        comment_id: task.comments[0]!.id,
        version: 1,
        body: 'too late',
      });
      expect(edit).toMatchObject({ ok: false, error: { code: 'unavailable' }, reason: 'lock_timeout', lock_timeout_ms: 200 });
      expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);
      hook.gate.open();
      expect(await sending).toMatchObject({ ok: true });
    } finally {
      await short.stop();
      shortHook.unsubscribe();
      await deleteTopology(nc, shortPrefix);
    }
  });

  it('a lost reply (client timeout while the hook is held), then the same request again: replayed, one message, comments consumed once', async () => {
    const task = await seedComments(2);
    const callerId = randomUUID();
    const hook = holdHook(callerId);
    const body = { session_id: task.sessionId, caller_id: callerId, content: 'once', plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }] };
    expect(await client.sendMessage(body, { timeoutMs: 200 })).toMatchObject({ ok: false, error: { code: 'unavailable' } });
    await hook.reached.opened;
    hook.gate.open();
    await eventually(async () => (await t.ctx.knex('task_session_messages').where({ id: callerId }).first()) ?? undefined, 10_000, 'the accepted message');
    const after = await settledAcceptanceState(t.ctx, task.taskId);
    expect(await client.sendMessage(body)).toMatchObject({ ok: true, replayed: true, message_id: callerId, plan_comments: { revision: 3 } });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(after);
  });

  it('a second request under one caller id sent while the hook of the first is held replays the first: one message', async () => {
    const task = await seedComments(1);
    const callerId = randomUUID();
    const hook = holdHook(callerId);
    const body = { session_id: task.sessionId, caller_id: callerId, content: 'twice', plan_comment_refs: [{ id: task.comments[0]!.id, version: 1 }] };
    const first = client.sendMessage(body);
    await hook.reached.opened;
    const second = client.sendMessage(body);
    hook.gate.open();
    const replies = await Promise.all([first, second]);
    expect(replies.map((r) => r.ok && r.replayed)).toEqual([false, true]);
    expect(await t.ctx.knex('task_session_messages').where({ id: callerId })).toHaveLength(1);
  });

  it('two concurrent sends on overlapping comments: exactly one accepted, one message, the loser gets the collection', async () => {
    const task = await seedComments(3);
    const [a, b, c] = task.comments;
    const idA = randomUUID();
    const idB = randomUUID();
    const replies = await Promise.all([
      client.sendMessage({
        session_id: task.sessionId,
        caller_id: idA,
        content: 'loser-or-winner A',
        plan_comment_refs: [
          { id: a!.id, version: 1 },
          { id: b!.id, version: 1 },
        ],
      }),
      client.sendMessage({
        session_id: task.sessionId,
        caller_id: idB,
        content: 'loser-or-winner B',
        plan_comment_refs: [
          { id: b!.id, version: 1 },
          { id: c!.id, version: 1 },
        ],
      }),
    ]);
    const won = replies.filter((r) => r.ok);
    const lost = replies.filter((r) => !r.ok);
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ error: { code: 'conflict' }, reason: 'plan_comments_changed', plan_comments: { revision: 4 } });
    const messages = await t.ctx.knex('task_session_messages').whereIn('id', [idA, idB]);
    expect(messages).toHaveLength(1);
    expect(messages[0].id).toBe((won[0] as { message_id: string }).message_id);
  });

  it('staged attachments are claimed by the send that carries them; an unknown one refuses it and writes nothing', async () => {
    const task = await seedComments(1);
    const owner = `user-${randomUUID()}`;
    const stage = await client.stageAttachment({
      id: `att-${randomUUID()}`,
      owner_id: owner,
      workspace_id: task.workspaceId,
      name: 'a.png',
      mime_type: 'image/png',
      size_bytes: 10,
      storage_key: `key-${randomUUID()}`,
    });
    if (!stage.ok) throw new Error(JSON.stringify(stage));
    expect(stage.attachment.state).toBe('staged');
    const before = await settledAcceptanceState(t.ctx, task.taskId);
    const refs = [{ id: task.comments[0]!.id, version: 1 }];
    const unknown = await client.sendMessage({
      session_id: task.sessionId,
      caller_id: randomUUID(),
      plan_comment_refs: refs,
      attachment_ids: ['no-such-attachment'],
      attachment_owner_id: owner,
    });
    expect(unknown).toMatchObject({ ok: false, error: { code: 'conflict' }, reason: 'attachments_unavailable' });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);
    const sent = await client.sendMessage({
      session_id: task.sessionId,
      caller_id: randomUUID(),
      plan_comment_refs: refs,
      attachment_ids: [stage.attachment.id],
      attachment_owner_id: owner,
    });
    expect(sent).toMatchObject({ ok: true });
    const row = await t.ctx.knex('task_message_attachments').where({ id: stage.attachment.id }).first();
    expect(row.state).toBe('claimed');
  });

  it('legacy import is one-time: a repeat, also after its drafts were consumed, creates nothing', async () => {
    const task = await seedPlanTask(t.ctx);
    const drafts = [
      { id: 'd1', sessionId: task.sessionId, text: 'from the browser', createdAt: '2026-09-01T10:00:00Z', source: 'plan' },
      { id: 'd2', sessionId: task.sessionId, text: 'already sent', createdAt: '2026-09-01T10:01:00Z', status: 'sent' },
    ];
    const first = await client.importLegacyPlanComments({ task_id: task.taskId, drafts });
    if (!first.ok) throw new Error(JSON.stringify(first));
    expect(first.imported).toHaveLength(1);
    expect(first.plan_comments.revision).toBe(1);
    expect(await eventAt(task.taskId, 1)).toEqual(first.plan_comments);
    const comment = first.plan_comments.comments[0]!;
    await client.runPlanComments({ task_id: task.taskId, caller_id: randomUUID(), plan_comment_refs: [{ id: comment.id, version: comment.version }] });
    const again = await client.importLegacyPlanComments({ task_id: task.taskId, drafts });
    expect(again).toMatchObject({ ok: true, imported: [], plan_comments: { revision: 2, comments: [] } });
  });

  it('bad input gets its documented code and changes nothing', async () => {
    const task = await seedComments(2);
    const foreign = await seedComments(1);
    const [c1] = task.comments;
    const subject = (name: string) => `${prefix}pending_projector.v1.${name}`;
    const raw = async (name: string, data: Uint8Array) => (await nc.request(subject(name), data, { timeout: 10_000 })).json<Record<string, unknown>>();
    const before = await settledAcceptanceState(t.ctx, task.taskId);
    const send = (over: Record<string, unknown>) =>
      client.sendMessage({
        session_id: task.sessionId,
        caller_id: randomUUID(),
        content: 'x',
        plan_comment_refs: [{ id: c1!.id, version: 1 }],
        ...over,
      } as never);

    expect(await raw('message.send', encoder.encode('{not json'))).toMatchObject({ ok: false, error: { code: 'bad_request' } });
    expect(
      await raw(
        'plan_comment.create',
        encoder.encode(JSON.stringify({ task_id: task.taskId, plan_id: task.planId, comment_id: 'big', body: 'x'.repeat(70 * 1024) })),
      ),
    ).toMatchObject({
      ok: false,
      error: { code: 'bad_request' },
    });
    expect(await send({ caller_id: 'has space' })).toMatchObject({ error: { code: 'bad_request' } });
    expect(await send({ caller_id: 'a>b' })).toMatchObject({ error: { code: 'bad_request' } });
    expect(await send({ caller_id: 'a*' })).toMatchObject({ error: { code: 'bad_request' } });
    expect(await send({ session_id: 's'.repeat(10 * 1024) })).toMatchObject({ error: { code: 'bad_request' } });
    expect(await send({ plan_comment_refs: [{ id: 'c'.repeat(10 * 1024), version: 1 }] })).toMatchObject({ error: { code: 'bad_request' } });
    expect(await send({ plan_comment_refs: [{ id: c1!.id, version: 0 }] })).toMatchObject({ error: { code: 'bad_request' } });
    expect(await send({ plan_comment_refs: [{ id: 'no-such-comment', version: 1 }] })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'plan_comments_changed',
    });
    expect(await send({ plan_comment_refs: [{ id: foreign.comments[0]!.id, version: 1 }] })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'plan_comments_changed',
    });
    expect(await send({ plan_comment_refs: [{ id: c1!.id, version: 2 }] })).toMatchObject({ error: { code: 'conflict' }, reason: 'plan_comments_changed' });
    expect(await send({ session_id: 'no-such-session' })).toMatchObject({ error: { code: 'not_found' }, reason: 'session_not_found' });
    expect(await send({ attachment_ids: ['no-such-attachment'], attachment_owner_id: 'someone' })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'attachments_unavailable',
    });
    expect(await client.updatePlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: 'no-such-comment', version: 1, body: 'x' })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'plan_comments_changed',
    });
    expect(await client.createPlanComment({ task_id: task.taskId, plan_id: 'other-plan', comment_id: `c-${randomUUID()}`, body: 'x' })).toMatchObject({
      error: { code: 'not_found' },
      reason: 'plan_not_found',
    });
    expect(await client.createPlanComment({ task_id: task.taskId, plan_id: task.planId, comment_id: `c-${randomUUID()}`, body: '   ' })).toMatchObject({
      error: { code: 'bad_request' },
    });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(before);

    await t.ctx.knex('tasks').where({ id: task.taskId }).update({ archived_at: '2026-09-01T00:00:00.000000Z' });
    const archived = await settledAcceptanceState(t.ctx, task.taskId);
    expect(await send({})).toMatchObject({ error: { code: 'conflict' }, reason: 'task_inactive' });
    expect(await client.runPlanComments({ task_id: task.taskId, caller_id: randomUUID(), plan_comment_refs: [{ id: c1!.id, version: 1 }] })).toMatchObject({
      error: { code: 'conflict' },
      reason: 'task_inactive',
    });
    expect(await settledAcceptanceState(t.ctx, task.taskId)).toEqual(archived);
  });
});
